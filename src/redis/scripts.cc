#include "redis/scripts.h"

#include <array>
#include <string>

namespace sluice::redis {

const Script& CheckScript(Algorithm algorithm) {
  static const auto* const scripts = [] {
    auto* built = new std::array<Script, std::size(kCheckSources)>;
    for (size_t i = 0; i < built->size(); ++i) {
      (*built)[i] = Script::FromSource(std::string(kCheckSources[i]));
    }
    return built;
  }();
  return (*scripts)[static_cast<size_t>(algorithm)];
}

const Script& CheckAllScript() {
  static const auto* const script = new Script(
      Script::FromSource("#!lua flags=allow-cross-slot-keys\n" + std::string(kCheckAllSource)));
  return *script;
}

}  // namespace sluice::redis
