// The encryption primitives against published known-answer vectors, and the
// sealed-value format, key ring, lookup tags and key files.

#include "storage/crypto.h"

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "storage/keys.h"
#include "storage/record.h"

namespace spool::storage {
namespace {

std::string Unhex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(
        std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

struct GcmVector {
  const char* name;
  const char* key;
  const char* nonce;
  const char* aad;
  const char* plaintext;
  const char* ciphertext;
  const char* tag;
};

// AES-256 test cases 13, 14 and 16 of McGrew and Viega, "The Galois/Counter
// Mode of Operation (GCM)", the vectors NIST's GCM specification carries;
// and one vector of NIST CAVP's gcmEncryptExtIV256 (96-bit IV, AAD).
const GcmVector kGcmVectors[] = {
    {"GCM spec test case 13 (empty)",
     "0000000000000000000000000000000000000000000000000000000000000000",
     "000000000000000000000000", "", "", "",
     "530f8afbc74536b9a963b4f1c4cb738b"},
    {"GCM spec test case 14",
     "0000000000000000000000000000000000000000000000000000000000000000",
     "000000000000000000000000", "", "00000000000000000000000000000000",
     "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"},
    {"GCM spec test case 16 (with AAD)",
     "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
     "cafebabefacedbaddecaf888", "feedfacedeadbeeffeedfacedeadbeefabaddad2",
     "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
     "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
     "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
     "76fc6ece0f4e1768cddf8853bb2d551b"},
    {"NIST CAVP gcmEncryptExtIV256",
     "83688deb4af8007f9b713b47cfa6c73e35ea7a3aa4ecdb414dded03bf7a0fd3a",
     "0b459724904e010a46901cf3", "794a14ccd178c8ebfd1379dc704c5e208f9d8424",
     "33d893a2114ce06fc15d55e454cf90c3", "cc66bee423e3fcd4c0865715e9586696",
     "0fb291bd3dba94a1dfd8b286cfb97ac5"},
};

TEST(AesGcmTest, MatchesKnownAnswerVectors) {
  for (const GcmVector& v : kGcmVectors) {
    SCOPED_TRACE(v.name);
    std::string sealed;
    ASSERT_TRUE(AesGcmSeal(Unhex(v.key), Unhex(v.nonce), Unhex(v.aad),
                           Unhex(v.plaintext), &sealed)
                    .ok());
    EXPECT_EQ(ToHex(sealed), std::string(v.ciphertext) + v.tag);

    std::string opened;
    ASSERT_TRUE(
        AesGcmOpen(Unhex(v.key), Unhex(v.nonce), Unhex(v.aad), sealed, &opened)
            .ok());
    EXPECT_EQ(ToHex(opened), v.plaintext);
  }
}

TEST(AesGcmTest, RejectsAnyChangedBitOfCiphertextTagOrAad) {
  const GcmVector& v = kGcmVectors[2];
  std::string key = Unhex(v.key);
  std::string nonce = Unhex(v.nonce);
  std::string aad = Unhex(v.aad);
  std::string sealed = Unhex(std::string(v.ciphertext) + v.tag);
  for (size_t i = 0; i < sealed.size(); ++i) {
    std::string changed = sealed;
    changed[i] ^= 0x01;
    std::string out;
    EXPECT_TRUE(AesGcmOpen(key, nonce, aad, changed, &out).IsCorruption())
        << "byte " << i;
    EXPECT_TRUE(out.empty());
  }
  std::string out;
  aad[0] ^= 0x80;
  EXPECT_TRUE(AesGcmOpen(key, nonce, aad, sealed, &out).IsCorruption());
  EXPECT_TRUE(
      AesGcmOpen(key.substr(1), nonce, aad, sealed, &out).IsInvalidArgument());
}

TEST(HmacSha256Test, MatchesRfc4231) {
  // Test case 2.
  EXPECT_EQ(ToHex(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(HkdfSha256Test, MatchesRfc5869) {
  // Test case 1.
  std::string okm;
  ASSERT_TRUE(HkdfSha256(std::string(22, '\x0b'),
                         Unhex("000102030405060708090a0b0c"),
                         Unhex("f0f1f2f3f4f5f6f7f8f9"), 42, &okm)
                  .ok());
  EXPECT_EQ(ToHex(okm),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
            "34007208d5b887185865");
}

std::shared_ptr<const KeyRing> Ring(const std::string& current,
                                    std::vector<std::string> previous = {}) {
  std::shared_ptr<const KeyRing> ring;
  Status s = KeyRing::Create(current, previous, &ring);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return ring;
}

TEST(KeyRingTest, SealsWithAFreshNonceAndOpensWithTheSameContext) {
  auto ring = Ring(NewRandomKey());
  std::string plaintext = "a state's bytes";
  std::string a;
  std::string b;
  ASSERT_TRUE(ring->Seal(ValueContext(StateKey(7)), plaintext, &a).ok());
  ASSERT_TRUE(ring->Seal(ValueContext(StateKey(7)), plaintext, &b).ok());
  EXPECT_EQ(a.size(), plaintext.size() + kSealOverhead);
  EXPECT_NE(a, b) << "two seals of the same bytes must differ (nonce)";
  EXPECT_TRUE(IsSealed(a));
  EXPECT_EQ(SealedKeyId(a), ring->current_id());
  EXPECT_EQ(a.find(plaintext), std::string::npos);

  std::string opened;
  uint32_t key_id = 0;
  ASSERT_TRUE(ring->Open(ValueContext(StateKey(7)), a, &opened, &key_id).ok());
  EXPECT_EQ(opened, plaintext);
  EXPECT_EQ(key_id, ring->current_id());

  // Bound to the value's key: the same value under another task's key, or
  // under another kind of value of the same task, fails.
  for (const std::string& other_key :
       {StateKey(8), SpecKey(7), FailureKey(7, 0), TaskPrefix(7)}) {
    Status other = ring->Open(ValueContext(other_key), a, &opened);
    EXPECT_TRUE(other.IsCorruption()) << TaskValueName(other_key);
    EXPECT_NE(other.message().find("copied from another task"),
              std::string::npos)
        << other.ToString();
  }
  // Failure entries are bound to their number.
  std::string failure;
  ASSERT_TRUE(
      ring->Seal(ValueContext(FailureKey(7, 3)), "failure", &failure).ok());
  EXPECT_TRUE(
      ring->Open(ValueContext(FailureKey(7, 3)), failure, &opened).ok());
  EXPECT_FALSE(
      ring->Open(ValueContext(FailureKey(7, 4)), failure, &opened).ok());
  // The context is "task" and the key itself.
  EXPECT_EQ(ValueContext(StateKey(7)), "task" + StateKey(7));

  // Every byte is covered: header, nonce, ciphertext and tag.
  for (size_t i = 0; i < a.size(); ++i) {
    std::string changed = a;
    changed[i] ^= 0x20;
    EXPECT_FALSE(ring->Open(ValueContext(StateKey(7)), changed, &opened).ok())
        << "byte " << i;
  }
}

TEST(KeyRingTest, PreviousKeysOpenWhatTheySealed) {
  std::string old_key = NewRandomKey();
  std::string new_key = NewRandomKey();
  auto old_ring = Ring(old_key);
  auto new_ring = Ring(new_key, {old_key});
  auto new_only = Ring(new_key);
  EXPECT_NE(old_ring->current_id(), new_ring->current_id());
  EXPECT_TRUE(new_ring->Has(old_ring->current_id()));

  std::string sealed;
  ASSERT_TRUE(old_ring->Seal("ctx", "secret", &sealed).ok());
  std::string opened;
  uint32_t key_id = 0;
  ASSERT_TRUE(new_ring->Open("ctx", sealed, &opened, &key_id).ok());
  EXPECT_EQ(opened, "secret");
  EXPECT_EQ(key_id, old_ring->current_id());

  Status s = new_only->Open("ctx", sealed, &opened);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find(KeyIdHex(old_ring->current_id())),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("not configured"), std::string::npos);

  // Seals with the new key.
  ASSERT_TRUE(new_ring->Seal("ctx", "secret", &sealed).ok());
  EXPECT_EQ(SealedKeyId(sealed), new_only->current_id());
  EXPECT_EQ(new_ring->DeriveLookupKey(), new_only->DeriveLookupKey());
  EXPECT_NE(new_ring->DeriveLookupKey(), old_ring->DeriveLookupKey());
}

TEST(KeyRingTest, RejectsBadKeysNamingThem) {
  std::shared_ptr<const KeyRing> ring;
  Status s = KeyRing::Create(std::string(31, 'k'), {}, &ring);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("encryption_key is 31 bytes"), std::string::npos)
      << s.ToString();

  std::string key = NewRandomKey();
  s = KeyRing::Create(key, {NewRandomKey(), std::string(33, 'k')}, &ring);
  EXPECT_NE(s.message().find("previous_encryption_keys[1] is 33 bytes"),
            std::string::npos)
      << s.ToString();
  s = KeyRing::Create(key, {NewRandomKey(), key}, &ring);
  EXPECT_NE(s.message().find("previous_encryption_keys[1] is the same key as "
                             "encryption_key"),
            std::string::npos)
      << s.ToString();
}

TEST(SealedFormatTest, NoValueLooksSealedAndNoSealedValueVerifies) {
  SpecRecord spec;
  spec.id = 3;
  spec.type = "t";
  spec.payload = std::string(300, 'p');
  spec.group = "g";
  StateRecord state;
  state.id = 3;
  state.type = "t";
  state.stored_group = "g";
  state.depends_on = {1, 2};
  FailureEntry failure{1, 5, "error"};
  auto ring = Ring(NewRandomKey());

  std::string plain = EncodeSpec(spec);
  EXPECT_FALSE(IsSealed(plain));
  std::string sealed;
  ASSERT_TRUE(ring->Seal(ValueContext(SpecKey(3)), plain, &sealed).ok());
  const fb::TaskSpec* spec_table = nullptr;
  EXPECT_TRUE(VerifySpec(3, sealed, &spec_table).IsCorruption());

  plain = EncodeState(state);
  EXPECT_FALSE(IsSealed(plain));
  ASSERT_TRUE(ring->Seal(ValueContext(StateKey(3)), plain, &sealed).ok());
  const fb::TaskState* state_table = nullptr;
  EXPECT_TRUE(VerifyState(3, sealed, &state_table).IsCorruption());

  plain = EncodeFailure(failure);
  EXPECT_FALSE(IsSealed(plain));
  ASSERT_TRUE(ring->Seal(ValueContext(FailureKey(3, 0)), plain, &sealed).ok());
  const fb::Failure* failure_table = nullptr;
  EXPECT_TRUE(VerifyFailure(3, sealed, &failure_table).IsCorruption());
}

TEST(LookupTaggerTest, IsDeterministicKeyedAndSeparatesDomains) {
  std::string key = NewRandomKey();
  LookupTagger tagger(key);
  LookupTagger same(key);
  LookupTagger other(NewRandomKey());
  EXPECT_EQ(tagger.Tag('g', "orders"), same.Tag('g', "orders"));
  EXPECT_EQ(tagger.Tag('g', "orders").size(), kLookupTagBytes);
  EXPECT_NE(tagger.Tag('g', "orders"), other.Tag('g', "orders"));
  EXPECT_NE(tagger.Tag('g', "orders"), tagger.Tag('d', "orders"));
  EXPECT_NE(tagger.Tag('g', "orders"), tagger.Tag('g', "orders2"));
  // The tag is HMAC-SHA256 of the domain byte and the value.
  EXPECT_EQ(tagger.Tag('g', "orders"), HmacSha256(key, "gorders"));
}

// The per-thread caches (keyed cipher contexts, keyed HMAC context, nonce
// pool) must never mix keys up, whatever the order of calls and threads.
TEST(CryptoCacheTest, InterleavedRingsTaggersAndThreadsStayApart) {
  std::string key_a = NewRandomKey();
  std::string key_b = NewRandomKey();
  auto a = Ring(key_a);
  auto b = Ring(key_b);
  std::string sealed_a;
  std::string sealed_b;
  std::string opened;
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(a->Seal("c", "from a", &sealed_a).ok());
    ASSERT_TRUE(b->Seal("c", "from b", &sealed_b).ok());
    ASSERT_TRUE(a->Open("c", sealed_a, &opened).ok());
    EXPECT_EQ(opened, "from a");
    EXPECT_FALSE(a->Open("c", sealed_b, &opened).ok());
    ASSERT_TRUE(b->Open("c", sealed_b, &opened).ok());
    EXPECT_EQ(opened, "from b");
    // A failed open leaves nothing behind for the next call.
    std::string altered = sealed_a;
    altered.back() ^= 1;
    EXPECT_FALSE(a->Open("c", altered, &opened).ok());
  }
  // A new ring with a key of its own, perhaps at a freed ring's address.
  a.reset();
  auto c = Ring(NewRandomKey());
  ASSERT_TRUE(c->Seal("c", "from c", &sealed_a).ok());
  EXPECT_FALSE(Ring(key_a)->Open("c", sealed_a, &opened).ok());
  ASSERT_TRUE(c->Open("c", sealed_a, &opened).ok());

  LookupTagger t1(key_a);
  LookupTagger t2(key_b);
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(t1.Tag('g', "x"), HmacSha256(key_a, "gx"));
    EXPECT_EQ(t2.Tag('g', "x"), HmacSha256(key_b, "gx"));
  }

  // Threads sealing and opening with one ring: every nonce differs.
  std::mutex mutex;
  std::set<std::string> nonces;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::string sealed;
      std::string plain;
      std::vector<std::string> mine;
      for (int i = 0; i < 2000; ++i) {
        std::string text = std::to_string(t) + ":" + std::to_string(i);
        std::string context = ValueContext(StateKey(i));
        if (!b->Seal(context, text, &sealed).ok() ||
            !b->Open(context, sealed, &plain).ok() || plain != text) {
          failures++;
        }
        mine.push_back(sealed.substr(kSealHeaderBytes, kNonceBytes));
        EXPECT_EQ(t1.Tag('d', text), HmacSha256(key_a, "d" + text));
      }
      std::lock_guard<std::mutex> lock(mutex);
      nonces.insert(mine.begin(), mine.end());
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(nonces.size(), 8000u);
}

TEST(KeyFileTest, ParsesCurrentAndPreviousKeysAndRejectsBadOnes) {
  std::string a = NewRandomKey();
  std::string b = NewRandomKey();
  std::string current;
  std::vector<std::string> previous;
  std::string text = "# spool keys, newest first\n\n  " + ToHex(a) + "  \n" +
                     ToHex(b) + "\r\n";
  ASSERT_TRUE(ParseKeyFile(text, "keys", &current, &previous).ok());
  EXPECT_EQ(current, a);
  ASSERT_EQ(previous.size(), 1u);
  EXPECT_EQ(previous[0], b);

  std::string hex = ToHex(a);
  Status s = ParseKeyFile(hex.substr(1), "storage.encryption_key_file k",
                          &current, &previous);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("storage.encryption_key_file k: line 1: "
                             "expected 64 hex digits"),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("got 63 characters"), std::string::npos);

  std::string bad = hex;
  bad[10] = 'z';
  s = ParseKeyFile("# c\n" + bad, "keys", &current, &previous);
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s.ToString();
  EXPECT_EQ(s.message().find(bad), std::string::npos)
      << "a message must never quote key material";
  EXPECT_TRUE(ParseKeyFile("# only a comment\n", "keys", &current, &previous)
                  .IsInvalidArgument());
}

}  // namespace
}  // namespace spool::storage
