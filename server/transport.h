// What one spoold connection reads and writes through: plain TCP, or TLS
// over TCP (server.tls_certificate_file), behind one interface, so that the
// HTTP code above is written once. The TLS context is built from the
// [server] settings with MakeTlsContext.
//
// Thread safety: a Transport belongs to its connection's strand, as a
// Beast stream does.

#ifndef SPOOL_SERVER_TRANSPORT_H_
#define SPOOL_SERVER_TRANSPORT_H_

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <memory>
#include <optional>
#include <utility>

#include <spool/http/server_options.h>
#include <spool/status.h>

namespace spool::http {

// The server's TLS context for `options`, or nullptr in *context when
// tls_certificate_file is empty (plain HTTP). TLS 1.2 and later only, no
// renegotiation, no compression; the key is read with ReadPrivateFile (so
// its file must be private to its owner) and checked against the
// certificate; with tls_client_ca_file, every client must present a
// certificate that CA signed. InvalidArgument naming the setting and the
// file when one is missing, unreadable, not PEM, or when certificate and
// key do not match.
Status MakeTlsContext(const ServerOptions& options,
                      std::shared_ptr<boost::asio::ssl::context>* context);

class Transport {
 public:
  using TcpStream = boost::beast::tcp_stream;
  using TlsStream = boost::beast::ssl_stream<TcpStream>;

  // Plain TCP.
  explicit Transport(boost::asio::ip::tcp::socket socket)
      : tcp_(std::in_place, std::move(socket)) {}
  // TLS on `socket`; Handshake before anything else.
  Transport(boost::asio::ip::tcp::socket socket,
            boost::asio::ssl::context& context)
      : tls_(std::in_place, std::move(socket), context) {}

  bool tls() const { return tls_.has_value(); }

  // Calls fn(stream) with the stream to read and write: a TcpStream or a
  // TlsStream. fn must compile for both.
  template <class Fn>
  decltype(auto) Visit(Fn&& fn) {
    if (tls_) return fn(*tls_);
    return fn(*tcp_);
  }

  // The TCP layer: timeouts, the socket, the executor.
  TcpStream& tcp() {
    return tls_ ? boost::beast::get_lowest_layer(*tls_) : *tcp_;
  }
  TcpStream::executor_type get_executor() { return tcp().get_executor(); }

  // The server side of the TLS handshake. REQUIRES: tls().
  template <class Handler>
  void AsyncHandshake(Handler&& handler) {
    tls_->async_handshake(boost::asio::ssl::stream_base::server,
                          std::forward<Handler>(handler));
  }

  // Ends the connection at once, without TLS's close_notify: every
  // response spoold sends is framed by its Content-Length, so a cut cannot
  // be mistaken for a complete answer, and a close must not wait on a
  // client that does not read.
  void Close() {
    boost::system::error_code ignored;
    tcp().socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both,
                            ignored);
    tcp().close();
  }

 private:
  std::optional<TcpStream> tcp_;
  std::optional<TlsStream> tls_;
};

}  // namespace spool::http

#endif  // SPOOL_SERVER_TRANSPORT_H_
