#include "redis/scripts.h"

#include <array>
#include <string>

namespace sluice::redis {

namespace {

using PerAlgorithm = std::array<Script, std::size(kCheckSources)>;

const PerAlgorithm* Build(const std::string_view (&sources)[6]) {
  auto* built = new PerAlgorithm;
  for (size_t i = 0; i < built->size(); ++i) {
    (*built)[i] = Script::FromSource(std::string(sources[i]));
  }
  return built;
}

}  // namespace

const Script& CheckScript(Algorithm algorithm) {
  static const PerAlgorithm* const scripts = Build(kCheckSources);
  return (*scripts)[static_cast<size_t>(algorithm)];
}

const Script& CheckManyScript(Algorithm algorithm) {
  static const PerAlgorithm* const scripts = Build(kCheckManySources);
  return (*scripts)[static_cast<size_t>(algorithm)];
}

const Script& CheckAllScript() {
  static const auto* const script = new Script(
      Script::FromSource("#!lua flags=allow-cross-slot-keys\n" + std::string(kCheckAllSource)));
  return *script;
}

}  // namespace sluice::redis
