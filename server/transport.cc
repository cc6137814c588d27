#include "server/transport.h"

#include <fstream>
#include <string>

#include <spool/secret_file.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

namespace spool::http {
namespace {

namespace ssl = boost::asio::ssl;

Status Invalid(const char* key, const std::string& path,
               const std::string& why) {
  return Status::InvalidArgument(std::string("server.") + key + " " + path +
                                 ": " + why);
}

// OpenSSL's reason for the last failure, and the queue emptied.
std::string OpenSslReason() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no reason given";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

// Opens `path` for reading or says why not, naming the setting.
Status Readable(const char* key, const std::string& path) {
  std::ifstream file(path);
  if (!file) return Invalid(key, path, "cannot be opened for reading");
  return Status::OK();
}

// No passphrase is ever asked for: an encrypted key is "not a PEM private
// key" here, rather than a prompt on spoold's terminal.
int NoPassphrase(char*, int, int, void*) { return 0; }

Status LoadKey(const ServerOptions& options, ssl::context* context) {
  std::string pem;
  if (Status s =
          ReadPrivateFile("server.tls_key_file", options.tls_key_file, &pem);
      !s.ok()) {
    return s;
  }
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key =
      bio ? PEM_read_bio_PrivateKey(bio, nullptr, NoPassphrase, nullptr)
          : nullptr;
  BIO_free(bio);
  OPENSSL_cleanse(pem.data(), pem.size());
  if (key == nullptr) {
    return Invalid(
        "tls_key_file", options.tls_key_file,
        "not an unencrypted PEM private key (" + OpenSslReason() + ")");
  }
  SSL_CTX* native = context->native_handle();
  const bool matches = SSL_CTX_use_PrivateKey(native, key) == 1 &&
                       SSL_CTX_check_private_key(native) == 1;
  EVP_PKEY_free(key);
  if (!matches) {
    return Invalid("tls_key_file", options.tls_key_file,
                   "does not match server.tls_certificate_file " +
                       options.tls_certificate_file + " (" + OpenSslReason() +
                       ")");
  }
  return Status::OK();
}

Status LoadClientCa(const ServerOptions& options, ssl::context* context) {
  const std::string& path = options.tls_client_ca_file;
  if (Status s = Readable("tls_client_ca_file", path); !s.ok()) return s;
  boost::system::error_code ec;
  context->load_verify_file(path, ec);
  if (ec) {
    ERR_clear_error();
    return Invalid("tls_client_ca_file", path,
                   "not a PEM certificate (" + ec.message() + ")");
  }
  // Every client proves itself with a certificate of that CA.
  context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert,
                           ec);
  if (ec) return Status::IOError("TLS verify mode: " + ec.message());
  return Status::OK();
}

}  // namespace

Status MakeTlsContext(const ServerOptions& options,
                      std::shared_ptr<ssl::context>* context) {
  context->reset();
  if (options.tls_certificate_file.empty() && options.tls_key_file.empty()) {
    if (!options.tls_client_ca_file.empty()) {
      return Status::InvalidArgument(
          "server.tls_client_ca_file needs server.tls_certificate_file and "
          "server.tls_key_file: client certificates are a part of TLS");
    }
    return Status::OK();
  }
  if (options.tls_certificate_file.empty() || options.tls_key_file.empty()) {
    return Status::InvalidArgument(
        "server.tls_certificate_file and server.tls_key_file: set both, or "
        "neither");
  }
  auto built = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = built->native_handle();
  if (SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1) {
    return Status::IOError("TLS: cannot require TLS 1.2: " + OpenSslReason());
  }
  SSL_CTX_set_options(native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                  SSL_OP_CIPHER_SERVER_PREFERENCE);
  const std::string& chain = options.tls_certificate_file;
  if (Status s = Readable("tls_certificate_file", chain); !s.ok()) return s;
  boost::system::error_code ec;
  built->use_certificate_chain_file(chain, ec);
  if (ec) {
    ERR_clear_error();
    return Invalid("tls_certificate_file", chain,
                   "not a PEM certificate chain (" + ec.message() + ")");
  }
  if (Status s = LoadKey(options, built.get()); !s.ok()) return s;
  if (!options.tls_client_ca_file.empty()) {
    if (Status s = LoadClientCa(options, built.get()); !s.ok()) return s;
  }
  *context = std::move(built);
  return Status::OK();
}

}  // namespace spool::http
