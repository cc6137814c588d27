// config/spool.toml documents spoold's [server], [cluster] and
// [handlers.NAME] keys in
// a commented-out block (spool::LoadOptions refuses sections it does not
// own). These tests hold that block to the code: uncommented, spoold reads
// it, its values are spoold's defaults, and every key spoold knows is in it.

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <spool/config.h>
#include <spool/http/spoold_config.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace spool::http {
namespace {

using ::testing::HasSubstr;

std::string ShippedConfig() {
  std::ifstream in(std::string(SPOOL_SOURCE_DIR) + "/config/spool.toml");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Where the commented spoold block begins.
constexpr char kBlockStart[] = "\n# [server]\n";

// The shipped file with its spoold block uncommented: "# key = v" becomes
// "key = v", "# # note" stays a comment, a lone "#" becomes blank.
std::string WithSpooldBlockUncommented(const std::string& shipped) {
  size_t start = shipped.find(kBlockStart);
  if (start == std::string::npos) return "";
  std::string out = shipped.substr(0, start + 1);
  std::istringstream block(shipped.substr(start + 1));
  for (std::string line; std::getline(block, line);) {
    if (line == "#") {
      line.clear();
    } else if (line.rfind("# ", 0) == 0) {
      line.erase(0, 2);
    }
    out += line + "\n";
  }
  return out;
}

// The key names of the lines "KEY = VALUE" in TOML `text`, sections left out.
std::vector<std::string> KeysOf(const std::string& text, size_t from) {
  std::vector<std::string> keys;
  std::istringstream in(text.substr(from));
  for (std::string line; std::getline(in, line);) {
    size_t eq = line.find(" = ");
    if (line.empty() || line[0] == '[' || line[0] == '#' ||
        eq == std::string::npos) {
      continue;
    }
    keys.push_back(line.substr(0, eq));
  }
  return keys;
}

TEST(SpooldConfigBlockTest, UncommentedItIsReadAndHoldsTheDefaults) {
  const std::string text = WithSpooldBlockUncommented(ShippedConfig());
  ASSERT_FALSE(text.empty()) << "no '# [server]' block in config/spool.toml";

  SpooldConfig parsed;
  Status s =
      ParseSpooldConfig(text, "config/spool.toml (spoold block)", {}, &parsed);
  ASSERT_TRUE(s.ok()) << s.ToString();

  // The defaults, but for the two values the file must set: the storage
  // path, and the allow-list it shows as an example.
  SpooldConfig expected;
  expected.runtime.path = "./spool-data";
  expected.handlers.http_post_options.allow = {
      "https://hooks.example.com:443/spool/**"};
  // The values alone: every source is the block's own line here.
  EXPECT_EQ(parsed.sources.Of("server.listen")
                .rfind("config/spool.toml (spoold block):", 0),
            0u);
  parsed.sources = {};
  EXPECT_EQ(DescribeSpooldConfig(parsed), DescribeSpooldConfig(expected));
}

TEST(SpooldConfigBlockTest, DocumentsEveryServerAndHandlerKey) {
  const std::string shipped = ShippedConfig();
  const size_t start = shipped.find(kBlockStart);
  ASSERT_NE(start, std::string::npos);
  const std::string block = shipped.substr(start);

  SpooldConfig defaults;
  defaults.runtime.path = "./spool-data";
  const std::string described = DescribeSpooldConfig(defaults);
  const size_t server = described.find("\n[server]\n");
  ASSERT_NE(server, std::string::npos);
  std::vector<std::string> keys = KeysOf(described, server);
  ASSERT_FALSE(keys.empty());
  for (const std::string& key : keys) {
    // As "# key = " in the block, or in the list of keys every handler
    // table takes ("#   key   ...").
    bool documented = block.find("\n# " + key + " = ") != std::string::npos ||
                      block.find("#   " + key + " ") != std::string::npos;
    EXPECT_TRUE(documented)
        << "spoold key '" << key << "' is not documented in config/spool.toml";
  }
}

// [cluster] is checked as a whole: a half-configured node is refused at
// start, naming the key.
TEST(SpooldConfigTest, ClusterKeysAreCheckedTogether) {
  SpooldConfig config;
  config.runtime.path = "./spool-data";
  const std::vector<std::string> base = {
      "cluster.etcd=http://127.0.0.1:2379", "cluster.name=a",
      "cluster.nodes=a,b,c", "cluster.advertise=http://127.0.0.1:8470"};
  ASSERT_TRUE(ParseSpooldConfig("", "--set", base, &config).ok());
  EXPECT_TRUE(config.cluster.enabled());
  EXPECT_EQ(config.cluster.nodes.size(), 3u);
  auto refused = [&](const std::string& override_text) {
    std::vector<std::string> overrides = base;
    overrides.push_back(override_text);
    SpooldConfig c;
    c.runtime.path = "./spool-data";
    return ParseSpooldConfig("", "--set", overrides, &c).ToString();
  };
  EXPECT_THAT(refused("cluster.name=d"), HasSubstr("cluster.nodes"));
  EXPECT_THAT(refused("cluster.nodes=a,a"), HasSubstr("listed twice"));
  EXPECT_THAT(refused("cluster.nodes=a"), HasSubstr("2 to 16"));
  EXPECT_THAT(refused("cluster.lease_ms=1500"), HasSubstr("cluster.lease_ms"));
  EXPECT_THAT(refused("cluster.advertise=127.0.0.1:1"),
              HasSubstr("cluster.advertise"));
  EXPECT_THAT(refused("cluster.etcd=ftp://x"), HasSubstr("cluster.etcd"));
  EXPECT_THAT(refused("cluster.prefix=spool/"), HasSubstr("cluster.prefix"));
  EXPECT_THAT(refused("cluster.leese_ms=1000"),
              HasSubstr("cluster.leese_ms: unknown key"));
}

TEST(SpooldConfigBlockTest, TheRuntimeLoaderStillRefusesTheServerSection) {
  // Why the block is commented out: a plain runtime config must not carry
  // sections nothing reads.
  const std::string text = WithSpooldBlockUncommented(ShippedConfig());
  Options options;
  Status s = ParseOptions(text, "spool.toml", {}, &options);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.ToString(), HasSubstr("server"));
}

}  // namespace
}  // namespace spool::http
