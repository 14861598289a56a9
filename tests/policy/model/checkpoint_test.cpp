// Unit tests of safetensors reading/writing, config parsing and RoPE.
// Shape legend: r rotary frequencies, e head_dim, b batch, h heads, t positions.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

#include <ATen/ATen.h>

#include "policy/model/layers.hpp"
#include "policy/model/model_config.hpp"
#include "policy/model/safetensors.hpp"

namespace fs = std::filesystem;
using namespace caf_agent::policy;

namespace {

fs::path temp_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("policy_model_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

tensor_map sample_tensors() {
  torch::manual_seed(3);
  return {{"a.f32", torch::randn({3, 5})},
          {"b.bf16", torch::randn({7}).to(torch::kBFloat16)},
          {"c.f16", torch::randn({2, 2, 2}).to(torch::kFloat16)},
          {"d.scalar", torch::tensor(1.5f).reshape({})}};
}

void expect_bit_equal(const tensor_map& a, const tensor_map& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_EQ(t.scalar_type(), b.at(name).scalar_type()) << name;
    EXPECT_EQ(t.sizes(), b.at(name).sizes()) << name;
    EXPECT_TRUE(torch::equal(t.reshape({-1}).view(torch::kUInt8), b.at(name).reshape({-1}).view(torch::kUInt8)))
        << name;
  }
}

// A file with the given header text and `data_bytes` zero bytes of data.
std::string write_raw(const fs::path& dir, const std::string& header, size_t data_bytes) {
  const auto path = (dir / "raw.safetensors").string();
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << std::string(data_bytes, '\0');
  return path;
}

}  // namespace

TEST(safetensors, round_trip_is_bit_exact_for_every_dtype) {
  auto dir = temp_dir("round_trip");
  auto tensors = sample_tensors();
  ASSERT_TRUE(write_safetensors((dir / "x.safetensors").string(), tensors));
  auto back = read_safetensors((dir / "x.safetensors").string());
  ASSERT_TRUE(back) << back.error().message;
  expect_bit_equal(tensors, back.value());
}

TEST(safetensors, sharded_checkpoint_round_trip) {
  auto dir = temp_dir("sharded");
  auto tensors = sample_tensors();
  ASSERT_TRUE(write_checkpoint_tensors(dir.string(), tensors, /*max_shard_bytes=*/40));
  EXPECT_TRUE(fs::exists(dir / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  auto back = read_checkpoint_tensors(dir.string());
  ASSERT_TRUE(back) << back.error().message;
  expect_bit_equal(tensors, back.value());
}

TEST(safetensors, corrupt_header_is_an_error) {
  auto dir = temp_dir("corrupt");
  auto r = read_safetensors(write_raw(dir, "{\"a\": {\"dtype\": \"F32\", ", 16));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("corrupt header"), std::string::npos) << r.error().message;
}

TEST(safetensors, header_length_past_the_file_is_an_error) {
  auto dir = temp_dir("length");
  const auto path = (dir / "bad.safetensors").string();
  std::ofstream(path, std::ios::binary).write("\xff\xff\x00\x00\x00\x00\x00\x00{}", 10);
  auto r = read_safetensors(path);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("exceeds the file"), std::string::npos) << r.error().message;
}

TEST(safetensors, truncated_data_is_an_error) {
  auto dir = temp_dir("truncated");
  auto r = read_safetensors(write_raw(dir, R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("truncated"), std::string::npos) << r.error().message;
}

TEST(safetensors, unsupported_dtype_and_inconsistent_offsets_are_errors) {
  auto dir = temp_dir("dtype");
  auto r = read_safetensors(write_raw(dir, R"({"w":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("unsupported dtype I64"), std::string::npos);
  r = read_safetensors(write_raw(dir, R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("does not match"), std::string::npos);
}

TEST(safetensors, missing_checkpoint_names_the_directory) {
  auto dir = temp_dir("missing");
  auto r = read_checkpoint_tensors(dir.string());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("model.safetensors"), std::string::npos);
}

TEST(model_config, unsupported_fields_are_named) {
  const std::string base = R"("vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 16)";
  EXPECT_TRUE(parse_model_config("{\"model_type\": \"qwen3\", " + base + "}", "c"));
  auto r = parse_model_config("{\"model_type\": \"mistral\", " + base + "}", "c");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("model_type 'mistral'"), std::string::npos);
  r = parse_model_config(
      "{\"model_type\": \"llama\", \"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2}, " + base + "}", "c");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("rope type 'dynamic'"), std::string::npos);
  r = parse_model_config("{\"model_type\": \"qwen2\", \"hidden_size\": \"8\", " + base + "}", "c");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("'hidden_size' must be an integer"), std::string::npos) << r.error().message;
}

TEST(rope, inverse_frequencies_match_the_closed_form) {
  rope_config rope;
  rope.theta = 500000.0;
  const int64_t e = 16;
  auto plain_r = rope_inv_freq(rope, e);
  rope.type = "linear";
  rope.factor = 4.0;
  auto linear_r = rope_inv_freq(rope, e);
  rope.type = "llama3";
  rope.factor = 8.0;
  rope.low_freq_factor = 1.0;
  rope.high_freq_factor = 4.0;
  rope.original_max_position_embeddings = 64;
  auto llama3_r = rope_inv_freq(rope, e);
  for (int64_t i = 0; i < e / 2; ++i) {
    const double f = std::pow(500000.0, -2.0 * static_cast<double>(i) / e);
    EXPECT_NEAR(plain_r[i].item<double>(), f, 1e-6 * f);
    EXPECT_NEAR(linear_r[i].item<double>(), f / 4.0, 1e-6 * f);
    // llama3: wavelengths above 64 tokens are divided by 8, below 16 kept, smooth between.
    const double wavelen = 2 * std::numbers::pi / f;
    const double smooth = (64.0 / wavelen - 1.0) / (4.0 - 1.0);
    const double want = wavelen > 64.0 ? f / 8.0 : wavelen < 16.0 ? f : (1 - smooth) * f / 8.0 + smooth * f;
    EXPECT_NEAR(llama3_r[i].item<double>(), want, 1e-5 * f) << i;
  }
}

TEST(rope, rotates_each_half_pair_by_position_times_frequency) {
  rope_config rope;
  const int64_t e = 8, t = 5;
  auto table = rope_table::make(rope, e, 32, torch::kCPU, torch::kFloat64);
  torch::manual_seed(0);
  auto x_bhte = torch::randn({1, 2, t, e}, torch::kFloat64);
  auto positions_bt = torch::tensor({0, 3, 7, 20, 31}, torch::kInt64).view({1, t});
  auto y_bhte = apply_rope(x_bhte, positions_bt, table);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t p = 0; p < t; ++p)
      for (int64_t i = 0; i < e / 2; ++i) {
        const double angle = positions_bt[0][p].item<double>() * std::pow(10000.0, -2.0 * i / e);
        const double a = x_bhte[0][h][p][i].item<double>(), b = x_bhte[0][h][p][i + e / 2].item<double>();
        EXPECT_NEAR(y_bhte[0][h][p][i].item<double>(), a * std::cos(angle) - b * std::sin(angle), 1e-5);
        EXPECT_NEAR(y_bhte[0][h][p][i + e / 2].item<double>(), b * std::cos(angle) + a * std::sin(angle), 1e-5);
      }
}
