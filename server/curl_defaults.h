// The libcurl options every spoold client request sets (the standby's
// follower, the etcd client), in one place so that none forgets one.

#ifndef SPOOL_SERVER_CURL_DEFAULTS_H_
#define SPOOL_SERVER_CURL_DEFAULTS_H_

#include <chrono>
#include <curl/curl.h>
#include <string>

namespace spool::http {

// On `curl`: http and https only, no redirects, no proxy from the
// environment (the peer is named in the config), no signals, the whole
// request bounded by `timeout`, and `ca_file` (when not empty) as the CAs
// to check the peer's certificate against.
void ApplyCurlDefaults(CURL* curl, std::chrono::milliseconds timeout,
                       const std::string& ca_file);

}  // namespace spool::http

#endif  // SPOOL_SERVER_CURL_DEFAULTS_H_
