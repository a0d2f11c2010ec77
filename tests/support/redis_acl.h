// The Redis user of docs/redis-acl.md, for the tests that run sluice through it. Its rules are
// read from the doc's `ACL SETUSER sluice ...` line itself, so that the doc and the tests cannot
// drift apart. Pure functions of the doc; safe from any thread.
#pragma once

#include <string>
#include <vector>

namespace sluice::testing {

// The rules of the doc's line, after the user's name ("on", ">PASSWORD", "~sluice:*", ...);
// empty when the doc has no such line.
std::vector<std::string> DocumentedAclRules();

// The command creating `user` afresh with those rules: `password` in place of PASSWORD, the key
// pattern of `key_prefix` ("billing:" gives ~billing:*), and without the rule `drop` (when not
// empty), as argv for RedisServer::Cli.
std::vector<std::string> DocumentedAclSetUser(const std::string& user, const std::string& password,
                                              const std::string& key_prefix,
                                              const std::string& drop = "");

}  // namespace sluice::testing
