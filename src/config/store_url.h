// The store's URL checked when the config is read, and the sentinels' login of a
// redis+sentinel:// store: store.sentinel_user, and store.sentinel_password_file or
// store.sentinel_password_env. Errors
// name the file, the line and the field, and never hold a password. Pure but for the file and
// the environment variable read.
#pragma once

#include "config/config.h"
#include "config/yaml_fields.h"
#include "config/yaml_reporter.h"
#include "sluice/status.h"

namespace sluice::config {

// store.sentinel_user, and store.sentinel_password_file / store.sentinel_password_env into
// store.sentinel_password,
// then store.url's form (OpenStore's schemes; a Redis URL as its parser reads it, with
// store.password), so that a bad URL stops the config at its line instead of the store's
// opening. `store.url` and `store.password` are read already.
Status ParseStoreUrlAndSentinel(const YamlReporter& report, const YamlFields& fields,
                                StoreConfig& store);

}  // namespace sluice::config
