// TLS on the remote workers' link (docs/scale-out.md, docs/security.md):
// CAF's libcaf_openssl carries the gateway's BASP traffic inside TLS, with
// a certificate on each side signed by one CA, so that a peer without such
// a certificate never reaches CAF's message layer at all.
//
// CAF reads the files itself, by path, when the first connection is made,
// and a file it cannot use then raises an error inside its multiplexer
// thread, which ends the process. So every file is checked here first,
// with OpenSSL, and a bad one is refused with the setting's name.

#ifndef SPOOL_RUNTIME_REMOTE_TLS_H_
#define SPOOL_RUNTIME_REMOTE_TLS_H_

#include <string>

#include <spool/status.h>

namespace caf {
class actor_system_config;
}  // namespace caf

namespace spool {

// The three PEM files of one side: its certificate, its private key, and
// the CA that signed the other side's certificate. All three or none.
struct RemoteTlsFiles {
  std::string certificate;
  std::string key;
  std::string ca;

  bool enabled() const {
    return !certificate.empty() || !key.empty() || !ca.empty();
  }
};

// OK when none is set, or when all three are, the key is private to its
// owner (CheckPrivateFile), each file parses as PEM, and the key matches
// the certificate. Otherwise InvalidArgument naming `prefix` + the field
// ("remote.tls_" for the runtime's config, "RemoteWorkerOptions::tls_"),
// the path and the reason.
Status CheckRemoteTls(const std::string& prefix, const RemoteTlsFiles& files);

// Loads CAF's OpenSSL module with `files`: every connection made or
// accepted by this actor system (caf::openssl::publish, remote_actor) is
// then TLS, both sides presenting their certificate and checking the
// other's against the CA. REQUIRES: the middleman loaded (LoadMiddleman),
// and CheckRemoteTls(files) returned OK with files.enabled().
void LoadRemoteTls(caf::actor_system_config* config,
                   const RemoteTlsFiles& files);

// Does nothing; calling it makes the linker take
// runtime/openssl_error_queue.cc, whose definitions of SSL_read,
// SSL_write, SSL_accept and SSL_connect empty OpenSSL's error queue before
// libcaf_openssl's calls (it leaves one peer's failed handshake there, and
// CAF then closes the next healthy connection that reads). LoadRemoteTls
// calls it.
void UseOpenSslErrorQueueGuard();

}  // namespace spool

#endif  // SPOOL_RUNTIME_REMOTE_TLS_H_
