// Reading secrets from files that only their owner may read: how spool
// reads [remote] secret_file and its TLS keys, and spoold its bearer tokens
// and TLS key, so that an embedding server can check its own secrets the
// same way.
//
// Each function opens the file first and judges what it opened (fstat), so
// that the file checked is the file read: a file swapped between a check and
// an open cannot slip through. Symbolic links are followed (secret stores
// such as Kubernetes' mount secrets as links); the mode judged is the
// target's.

#ifndef SPOOL_INCLUDE_SECRET_FILE_H_
#define SPOOL_INCLUDE_SECRET_FILE_H_

#include <cstddef>
#include <string>

#include <spool/status.h>

namespace spool {

// The largest file ReadPrivateFile reads: a PEM key or certificate chain is
// a few KiB.
inline constexpr size_t kMaxPrivateFileBytes = size_t{1} << 20;

// Reads the secret in the first line of `path` (surrounding blanks
// stripped) into *secret. `what` names the setting in errors (e.g.
// "remote.secret_file"). NotFound or IOError when the file cannot be read;
// InvalidArgument when it is not a regular file, when group or others may
// access it (the error says to chmod 600), or when the secret is shorter
// than 16 bytes.
Status LoadSecretFile(const std::string& what, const std::string& path,
                      std::string* secret);

// Reads all of `path` (at most kMaxPrivateFileBytes) into *contents, under
// the same rules as LoadSecretFile but for the secret's length: for PEM
// private keys handed to OpenSSL as bytes. InvalidArgument also when the
// file is larger than kMaxPrivateFileBytes.
Status ReadPrivateFile(const std::string& what, const std::string& path,
                       std::string* contents);

// OK when `path` is a regular file that group and others may not access;
// the errors of LoadSecretFile otherwise. For a key file that a library
// must open by path itself (CAF's TLS): the check cannot cover a swap after
// it, which only someone who may write the key's directory can make.
Status CheckPrivateFile(const std::string& what, const std::string& path);

}  // namespace spool

#endif  // SPOOL_INCLUDE_SECRET_FILE_H_
