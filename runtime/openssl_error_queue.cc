// Empties OpenSSL's per-thread error queue before each TLS I/O call, for
// libcaf_openssl, which does not (docs/security.md, the remote gateway's
// table).
//
// OpenSSL's rule: "the current thread's error queue must be empty before
// the TLS/SSL I/O operation is attempted, or SSL_get_error() will not work
// reliably" (SSL_get_error(3)). CAF 0.17 runs every TLS connection of a
// process on its one multiplexer thread, and drains the queue only inside
// a log statement that Debian's build compiles out. So when one peer's
// handshake fails (a worker without a certificate, one of another CA, a
// plain BASP peer), the error stays on that thread, and the next
// SSL_read of a healthy connection that only wants more bytes is told
// SSL_ERROR_SSL: CAF closes it. Measured at 72bd7db: three strangers
// retrying their handshakes dropped the certified worker's connection 14
// times in 10 s, each loss counting its leased attempts as interrupted.
//
// The fix a caller of OpenSSL owes is one ERR_clear_error() before each
// call; CAF cannot be patched here (Debian's package), so these four
// definitions stand in front of libssl's for the whole process, call
// ERR_clear_error(), and pass on to the real function. Callers that clear
// the queue themselves (Boost.Asio, libcurl) are unaffected: an empty
// queue cleared again is still empty.

#include <dlfcn.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "runtime/remote_tls.h"

namespace {

template <class Fn>
Fn Next(const char* name) {
  // RTLD_NEXT: the definition after this one in the lookup order, libssl's.
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

int SSL_read(SSL* ssl, void* buffer, int size) {
  static const auto real = Next<int (*)(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  return real(ssl, buffer, size);
}

int SSL_write(SSL* ssl, const void* buffer, int size) {
  static const auto real = Next<int (*)(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return real(ssl, buffer, size);
}

int SSL_accept(SSL* ssl) {
  static const auto real = Next<int (*)(SSL*)>("SSL_accept");
  ERR_clear_error();
  return real(ssl);
}

int SSL_connect(SSL* ssl) {
  static const auto real = Next<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  return real(ssl);
}

}  // extern "C"

namespace spool {

void UseOpenSslErrorQueueGuard() {}

}  // namespace spool
