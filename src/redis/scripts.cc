#include "redis/scripts.h"

#include <array>
#include <cassert>
#include <string>

namespace sluice::redis {

namespace {

template <size_t N>
const std::array<Script, N>* Build(const std::string_view (&sources)[N]) {
  auto* built = new std::array<Script, N>;
  for (size_t i = 0; i < N; ++i) (*built)[i] = Script::FromSource(std::string(sources[i]));
  return built;
}

}  // namespace

const Script& CheckScript(Algorithm algorithm) {
  static const auto* const scripts = Build(kCheckSources);
  return (*scripts)[static_cast<size_t>(algorithm)];
}

const Script& CheckManyScript(Algorithm algorithm) {
  static const auto* const scripts = Build(kCheckManySources);
  return (*scripts)[static_cast<size_t>(algorithm)];
}

const Script& CheckAllScript() {
  static const auto* const script = new Script(
      Script::FromSource("#!lua flags=allow-cross-slot-keys\n" + std::string(kCheckAllSource)));
  return *script;
}

const Script& GiveBackScript(Algorithm meter) {
  assert(IsMeter(meter));
  static const auto* const scripts = Build(kGiveBackSources);
  return (*scripts)[static_cast<size_t>(meter) - static_cast<size_t>(Algorithm::kTokenBucket)];
}

}  // namespace sluice::redis
