#include "middleware/refusal.h"

#include "sluice/store.h"

namespace sluice::middleware {

Refusal RefusalOf(const Status& error) {
  if (IsStoreOutage(error) || error.code() == StatusCode::kResourceExhausted) {
    return {.status = 503, .retry_after = "1"};
  }
  return {.status = 500, .retry_after = {}};
}

}  // namespace sluice::middleware
