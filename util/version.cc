#include <spool/version.h>

namespace spool {

const char* Version() { return SPOOL_VERSION_STRING; }

}  // namespace spool
