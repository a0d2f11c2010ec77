#include "config/yaml_fields.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace sluice::config {
namespace {

YAML::Node Load(const std::string& text) { return *ParseYaml(text, YamlReporter("f.yaml")); }

TEST(YamlFields, UnknownRepeatedAndNonMappingFieldsNameFileLineAndField) {
  const YamlReporter report("f.yaml");
  const YAML::Node root = Load("s:\n  a: 1\n  b: 2\n  a: 3\n");
  YamlFields top(report, root, "");
  EXPECT_TRUE(top.Check({"s"}).ok());
  EXPECT_EQ(YamlFields(report, top.Get("s"), "s").Check({"a"}).message(),
            "f.yaml:3: s.b: unknown field (expected a)");
  EXPECT_EQ(YamlFields(report, top.Get("s"), "s").Check({"a", "b"}).message(),
            "f.yaml:4: s.a: field given twice");
  EXPECT_EQ(YamlFields(report, Load("[1]"), "").Check({"a"}).message(),
            "f.yaml:1: (top level): expected a mapping of fields");
  EXPECT_EQ(top.Missing("t").message(), "f.yaml:1: t: missing required field");
}

TEST(YamlFields, TheTwoDialectsReadScalarsAsTheirFilesMeanThem) {
  const YamlReporter report("f.yaml");
  const YAML::Node root = Load("on: yes\nplus: +5\nquoted: \"5\"\nnothing: ~\nlist: [1]\n");
  const YamlFields strict(report, root, "", YamlDialect::kStrict);
  const YamlFields yaml11(report, root, "", YamlDialect::kYaml11);

  EXPECT_EQ(strict.ReadBool(strict.Get("on"), "on").status().message(),
            "f.yaml:1: on: expected true or false");
  EXPECT_EQ(*yaml11.ReadBool(yaml11.Get("on"), "on"), true);

  EXPECT_EQ(strict.ReadInteger(strict.Get("plus"), "plus").status().message(),
            "f.yaml:2: plus: expected an integer, got '+5'");
  EXPECT_EQ(*yaml11.ReadInteger(yaml11.Get("plus"), "plus"), 5);
  EXPECT_EQ(*strict.ReadInteger(strict.Get("quoted"), "quoted"), 5);
  EXPECT_EQ(yaml11.ReadInteger(yaml11.Get("quoted"), "quoted").status().message(),
            "f.yaml:3: quoted: expected an integer, got '5'");
  EXPECT_EQ(strict.ReadInteger(strict.Get("list"), "list").status().message(),
            "f.yaml:5: list: expected an integer");

  EXPECT_TRUE(strict.Has("nothing"));
  EXPECT_FALSE(yaml11.Has("nothing"));
  EXPECT_EQ(yaml11.Error("nothing", "needed").message(), "f.yaml:1: nothing: needed");
}

TEST(YamlFields, FilesAreReadWithErrorsNamingThem) {
  EXPECT_EQ(ReadYamlFile("/nonexistent/x.yaml", "test file", 1 << 20).status().message(),
            "cannot open test file '/nonexistent/x.yaml': No such file or directory");
  const std::string path = ::testing::TempDir() + "yaml_fields_test.yaml";
  { std::ofstream(path) << std::string((1 << 20) + 1, '#'); }
  EXPECT_EQ(ReadYamlFile(path, "test file", 1 << 20).status().message(),
            "test file '" + path + "' is larger than 1 MiB");
  std::remove(path.c_str());
  EXPECT_EQ(ParseYaml("a: [", YamlReporter("f.yaml")).status().message().substr(0, 17),
            "f.yaml:1: (syntax");
}

}  // namespace
}  // namespace sluice::config
