// tests/base/named_enum_test.cpp: enums with names (base/named_enum.hpp) of any namespace, and
// how a config field list prints them.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "base/config_fields.hpp"
#include "base/named_enum.hpp"

namespace caf_agent::test_colors {
enum class color : uint8_t { red, dark_green };
CAF_AGENT_ENUM_NAMES(color, "red", "dark-green")
}  // namespace caf_agent::test_colors

using caf_agent::test_colors::color;
namespace base = caf_agent::base;

TEST(named_enum, names_convert_both_ways) {
  static_assert(base::named_enum<color>);
  static_assert(!base::named_enum<int>);
  EXPECT_EQ(base::name_of(color::dark_green), "dark-green");
  EXPECT_EQ(to_string(color::red), "red");  // found beside the enum
  EXPECT_EQ(base::parse_name<color>("dark-green"), color::dark_green);
  EXPECT_FALSE(base::parse_name<color>("dark_green"));
  EXPECT_EQ(base::name_of(static_cast<color>(7)), "?");
  EXPECT_EQ(base::names_list<color>(), "red, dark-green");
  EXPECT_EQ(base::enum_names<color>::names.size(), 2U);
}

TEST(named_enum, an_unknown_name_is_an_error_naming_the_names) {
  EXPECT_EQ(base::parse_name_or_throw<color>("red", "color"), color::red);
  try {
    (void)base::parse_name_or_throw<color>("blue", "color");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "color has no value \"blue\" (one of: red, dark-green)");
  }
}

TEST(named_enum, a_config_field_prints_its_name) {
  EXPECT_EQ(base::toml_value(color::dark_green), "\"dark-green\"");
}
