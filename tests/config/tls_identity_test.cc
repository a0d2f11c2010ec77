// rls.tls in the configuration: the files it names must be readable, client_san needs the client
// authority, and bad values are refused with file, line and field.
#include "config/tls_identity.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/config.h"

namespace sluice::config {
namespace {

class RlsTlsConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("rls_tls_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    for (const char* name : {"cert.pem", "key.pem", "ca.pem"}) std::ofstream(dir_ / name) << "x";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string File(const std::string& name) const { return (dir_ / name).string(); }

  Result<Config> Parse(const std::string& tls) const {
    return ParseConfig(
        "rls:\n  config_dir: /tmp\n  grpc_listen: 127.0.0.1:8081\n  tls: " + tls + "\n", "s.yaml");
  }
  std::string Error(const std::string& tls) const {
    auto config = Parse(tls);
    return config.ok() ? "parsed" : config.status().message();
  }

  std::filesystem::path dir_;
};

TEST_F(RlsTlsConfigTest, ParsesTheFilesAndTheAllowedNames) {
  auto config = Parse("{cert_file: " + File("cert.pem") + ", key_file: " + File("key.pem") +
                      ", client_ca_file: " + File("ca.pem") +
                      ", client_san: [envoy.mesh.internal, \"spiffe://mesh/envoy\"]}");
  ASSERT_TRUE(config.ok()) << config.status().message();
  ASSERT_TRUE(config->rls.tls.has_value());
  EXPECT_EQ(config->rls.tls->cert_file, File("cert.pem"));
  EXPECT_EQ(config->rls.tls->key_file, File("key.pem"));
  EXPECT_EQ(config->rls.tls->client_ca_file, File("ca.pem"));
  EXPECT_EQ(config->rls.tls->client_san,
            (std::vector<std::string>{"envoy.mesh.internal", "spiffe://mesh/envoy"}));
  auto plain = ParseConfig("rls: {config_dir: /tmp, grpc_listen: 127.0.0.1:8081}\n", "s.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->rls.tls.has_value());
}

TEST_F(RlsTlsConfigTest, RefusesBadTlsNamingFileLineAndField) {
  const std::string cert = "cert_file: " + File("cert.pem");
  const std::string key = "key_file: " + File("key.pem");
  EXPECT_EQ(Error("{" + cert + "}"), "s.yaml:4: rls.tls.key_file: missing required field");
  EXPECT_EQ(Error("{" + cert + ", key_file: " + File("nope.pem") + "}"),
            "s.yaml:4: rls.tls.key_file: cannot read '" + File("nope.pem") +
                "': No such file or directory");
  EXPECT_EQ(Error("{" + cert + ", " + key + ", client_san: [a]}"),
            "s.yaml:4: rls.tls.client_san: needs client_ca_file: the names are those of verified "
            "client certificates");
  EXPECT_EQ(Error("{" + cert + ", " + key + ", client_ca_file: " + File("ca.pem") +
                  ", client_san: [a, a]}"),
            "s.yaml:4: rls.tls.client_san[1]: 'a' given twice");
  EXPECT_EQ(Error("{" + cert + ", " + key + ", ciphers: x}"),
            "s.yaml:4: rls.tls.ciphers: unknown field (expected cert_file, key_file, "
            "client_ca_file, client_san)");
  auto no_port =
      ParseConfig("rls: {config_dir: /tmp, tls: {" + cert + ", " + key + "}}\n", "s.yaml");
  ASSERT_FALSE(no_port.ok());
  EXPECT_EQ(no_port.status().message(), "s.yaml:1: rls.tls: needs grpc_listen");
}

}  // namespace
}  // namespace sluice::config
