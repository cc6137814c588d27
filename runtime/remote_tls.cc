#include "runtime/remote_tls.h"

#include <memory>

#include <spool/secret_file.h>

#include <caf/actor_system_config.hpp>
#include <caf/openssl/manager.hpp>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

namespace spool {
namespace {

// OpenSSL's reason for the last failure, and its error queue emptied.
std::string OpenSslReason() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no reason given";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

// A passphrase is never asked for: CAF would ask on the terminal.
int NoPassphrase(char*, int, int, void*) { return 0; }

struct CtxFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};

// Whether the private key in `path` parses and belongs to the certificate
// already in `ctx`.
Status CheckKey(const std::string& what, const std::string& path,
                SSL_CTX* ctx) {
  std::string pem;
  if (Status s = ReadPrivateFile(what, path, &pem); !s.ok()) return s;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key =
      bio ? PEM_read_bio_PrivateKey(bio, nullptr, NoPassphrase, nullptr)
          : nullptr;
  BIO_free(bio);
  OPENSSL_cleanse(pem.data(), pem.size());
  if (key == nullptr) {
    return Status::InvalidArgument(what + " " + path +
                                   ": not an unencrypted PEM private key (" +
                                   OpenSslReason() + ")");
  }
  const bool matches = SSL_CTX_use_PrivateKey(ctx, key) == 1 &&
                       SSL_CTX_check_private_key(ctx) == 1;
  EVP_PKEY_free(key);
  if (!matches) {
    return Status::InvalidArgument(what + " " + path +
                                   ": does not match the certificate (" +
                                   OpenSslReason() + ")");
  }
  return Status::OK();
}

}  // namespace

Status CheckRemoteTls(const std::string& prefix, const RemoteTlsFiles& files) {
  if (!files.enabled()) return Status::OK();
  if (files.certificate.empty() || files.key.empty() || files.ca.empty()) {
    return Status::InvalidArgument(
        prefix + "certificate_file, " + prefix + "key_file and " + prefix +
        "ca_file: set all three, or none (each side presents a certificate "
        "and checks the other's against the CA)");
  }
  std::unique_ptr<SSL_CTX, CtxFree> ctx(SSL_CTX_new(TLS_method()));
  if (!ctx) return Status::IOError("TLS: " + OpenSslReason());
  if (SSL_CTX_use_certificate_chain_file(ctx.get(),
                                         files.certificate.c_str()) != 1) {
    return Status::InvalidArgument(
        prefix + "certificate_file " + files.certificate +
        ": not a readable PEM certificate chain (" + OpenSslReason() + ")");
  }
  if (Status s = CheckKey(prefix + "key_file", files.key, ctx.get()); !s.ok()) {
    return s;
  }
  if (SSL_CTX_load_verify_locations(ctx.get(), files.ca.c_str(), nullptr) !=
      1) {
    return Status::InvalidArgument(prefix + "ca_file " + files.ca +
                                   ": not a readable PEM certificate (" +
                                   OpenSslReason() + ")");
  }
  return Status::OK();
}

void LoadRemoteTls(caf::actor_system_config* config,
                   const RemoteTlsFiles& files) {
  UseOpenSslErrorQueueGuard();
  config->load<caf::openssl::manager>();
  config->openssl_certificate = files.certificate;
  config->openssl_key = files.key;
  config->openssl_cafile = files.ca;
}

}  // namespace spool
