// Reading a shared secret from a file that only its owner may read: how
// spool reads [remote] secret_file, and spoold its bearer token, so that an
// embedding server can check its own secrets the same way.

#ifndef SPOOL_INCLUDE_SECRET_FILE_H_
#define SPOOL_INCLUDE_SECRET_FILE_H_

#include <string>

#include <spool/status.h>

namespace spool {

// Reads the secret in the first line of `path` (surrounding blanks
// stripped) into *secret. `what` names the setting in errors (e.g.
// "remote.secret_file"). NotFound or IOError when the file cannot be read;
// InvalidArgument when it is not a regular file, when group or others may
// access it (the error says to chmod 600), or when the secret is shorter
// than 16 bytes.
Status LoadSecretFile(const std::string& what, const std::string& path,
                      std::string* secret);

}  // namespace spool

#endif  // SPOOL_INCLUDE_SECRET_FILE_H_
