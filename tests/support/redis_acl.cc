#include "support/redis_acl.h"

#include <fstream>
#include <sstream>
#include <string_view>

namespace sluice::testing {

std::vector<std::string> DocumentedAclRules() {
  std::ifstream in(SLUICE_SOURCE_DIR "/docs/redis-acl.md");
  constexpr std::string_view kHead = "ACL SETUSER sluice ";
  std::vector<std::string> rules;
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(kHead)) continue;
    std::istringstream words(line.substr(kHead.size()));
    for (std::string word; words >> word;) rules.push_back(word);
    break;
  }
  return rules;
}

std::vector<std::string> DocumentedAclSetUser(const std::string& user, const std::string& password,
                                              const std::string& key_prefix,
                                              const std::string& drop) {
  std::vector<std::string> command = {"ACL", "SETUSER", user, "reset"};
  for (const std::string& rule : DocumentedAclRules()) {
    if (!drop.empty() && rule == drop) continue;
    if (rule == ">PASSWORD") {
      command.push_back(">" + password);
    } else if (rule == "~sluice:*") {
      command.push_back("~" + key_prefix + "*");
    } else {
      command.push_back(rule);
    }
  }
  return command;
}

}  // namespace sluice::testing
