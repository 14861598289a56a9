// Round trips of the worker protocol's structs and framing.
#include "gpu_pool/worker_protocol.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

namespace gp = caf_agent::gpu_pool;

TEST(worker_protocol, request_round_trips) {
  gp::eval_request r;
  r.job_id = "job-7";
  r.mode = gp::eval_mode::profile;
  r.task_name = "add_relu";
  r.model_py = "class Model: ...\n";
  r.files = {{"model_new.py", "import torch\n"}, {"kernels/a.cpp", "// \xc3\xa9\n"}};
  r.seed_secret = "s3cret";
  r.device = "cuda:0";
  r.options.atol = 1e-3;
  r.options.num_checks = 7;
  r.options.timing.budget_s = 0.5;
  r.options.timing.fresh_baselines = true;
  std::string err;
  auto back = gp::decode_request(gp::encode_request(r), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->job_id, r.job_id);
  EXPECT_EQ(back->mode, gp::eval_mode::profile);
  EXPECT_EQ(back->task_name, r.task_name);
  EXPECT_EQ(back->model_py, r.model_py);
  EXPECT_EQ(back->files, r.files);
  EXPECT_EQ(back->seed_secret, r.seed_secret);
  EXPECT_EQ(back->options.atol, r.options.atol);
  EXPECT_FALSE(back->options.rtol.has_value());
  EXPECT_EQ(back->options.num_checks, 7);
  EXPECT_EQ(back->options.timing.budget_s, 0.5);
  EXPECT_EQ(back->options.timing.fresh_baselines, true);
}

TEST(worker_protocol, response_round_trips_with_timings) {
  gp::eval_response r;
  r.job_id = "j";
  r.result.correct = true;
  r.result.reason = "";
  r.result.checks = {{0, true, ""}, {1, false, "mismatch at (0, 1)"}};
  r.result.has_timings = true;
  r.result.times.candidate_ms = 0.5;
  r.result.times.eager_ms = 1.0;
  r.result.times.compile_ms = 0.75;
  r.result.times.iterations = 40;
  r.result.times.ci95["candidate"] = {0.49, 0.51};
  r.result.flags = {"below_roofline"};
  r.result.speedup_eager = 2.0;
  r.result.speedup_compile = 1.5;
  r.result.compile_log = "ok";
  std::string err;
  auto back = gp::decode_response(gp::encode_response(r), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_FALSE(back->infra_error);
  EXPECT_TRUE(back->result.correct);
  ASSERT_EQ(back->result.checks.size(), 2u);
  EXPECT_EQ(back->result.checks[1].reason, "mismatch at (0, 1)");
  EXPECT_TRUE(back->result.has_timings);
  EXPECT_DOUBLE_EQ(back->result.times.compile_ms, 0.75);
  EXPECT_EQ(back->result.times.iterations, 40);
  EXPECT_EQ(back->result.times.ci95["candidate"], (std::vector<double>{0.49, 0.51}));
  EXPECT_EQ(back->result.flags, std::vector<std::string>{"below_roofline"});
  EXPECT_DOUBLE_EQ(back->result.speedup_compile, 1.5);
}

TEST(worker_protocol, infra_error_and_python_style_nulls) {
  // The Python worker sends nil for speedups in verify mode and extra keys (reward).
  nlohmann::json j = {{"job_id", "x"},
                      {"status", "ok"},
                      {"verdict",
                       {{"correct", false},
                        {"reason", "torch fallback"},
                        {"speedup_eager", nullptr},
                        {"timings", nlohmann::json::object()},
                        {"reward", -1}}}};
  auto bytes = nlohmann::json::to_msgpack(j);
  std::string err;
  auto r = gp::decode_response(std::string(bytes.begin(), bytes.end()), &err);
  ASSERT_TRUE(r) << err;
  EXPECT_FALSE(r->result.has_timings);
  EXPECT_EQ(r->result.speedup_eager, 0.0);
  gp::eval_response infra;
  infra.job_id = "y";
  infra.infra_error = true;
  infra.error = "task failed to load";
  auto back = gp::decode_response(gp::encode_response(infra), &err);
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->infra_error);
  EXPECT_EQ(back->error, "task failed to load");
}

TEST(worker_protocol, garbage_is_an_error_value) {
  std::string err;
  EXPECT_FALSE(gp::decode_response("\xc1\xc1garbage", &err));
  EXPECT_FALSE(err.empty());
  auto not_map = nlohmann::json::to_msgpack(nlohmann::json::array({1, 2}));
  err.clear();
  EXPECT_FALSE(gp::decode_response(std::string(not_map.begin(), not_map.end()), &err));
  EXPECT_FALSE(err.empty());
  // A status outside the protocol's names (or not a string) is neither ok nor infra_error.
  for (auto status : {nlohmann::json("OK"), nlohmann::json("infra"), nlohmann::json(1)}) {
    auto odd = nlohmann::json::to_msgpack(nlohmann::json{{"status", status}, {"verdict", nlohmann::json::object()}});
    err.clear();
    EXPECT_FALSE(gp::decode_response(std::string(odd.begin(), odd.end()), &err)) << status.dump();
    EXPECT_NE(err.find("status"), std::string::npos) << err;
  }
}

TEST(worker_protocol, framing_handles_split_and_joined_frames) {
  const std::string a = gp::frame("hello"), b = gp::frame(std::string(70000, 'x'));
  ASSERT_EQ(a.size(), 9u);
  EXPECT_EQ(a.substr(0, 4), std::string("\0\0\0\x05", 4));
  gp::frame_reader r;
  std::string err;
  const std::string both = a + b;
  for (std::size_t i = 0; i < both.size(); i += 1000) r.feed(std::string_view(both).substr(i, 1000));
  auto first = r.next(&err);
  auto second = r.next(&err);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(*first, "hello");
  EXPECT_EQ(second->size(), 70000u);
  EXPECT_FALSE(r.next(&err));
  EXPECT_TRUE(err.empty());
}

TEST(worker_protocol, oversize_frame_is_rejected) {
  gp::frame_reader r;
  r.feed(std::string("\xff\xff\xff\xff", 4));
  std::string err;
  EXPECT_FALSE(r.next(&err));
  EXPECT_NE(err.find("exceeds"), std::string::npos);
}

TEST(worker_protocol, build_request_carries_files_flavour_and_timeout) {
  gp::build_request r;
  r.job_id = "b7";
  r.files = {{"kernels/a.cu", "__global__ void k() {}"}, {"model_new.py", "x = 1"}};
  r.flavour = "cuda";
  r.timeout_s = 30.0;
  auto bytes = gp::encode_build_request(r);
  auto j = nlohmann::json::from_msgpack(bytes);
  EXPECT_EQ(j["op"], "build");
  EXPECT_EQ(j["job_id"], "b7");
  EXPECT_EQ(j["files"]["kernels/a.cu"], "__global__ void k() {}");
  EXPECT_EQ(j["flavour"], "cuda");
  EXPECT_EQ(j["timeout_s"], 30.0);
  r.flavour.clear();
  r.timeout_s.reset();
  auto plain = nlohmann::json::from_msgpack(gp::encode_build_request(r));
  EXPECT_FALSE(plain.contains("flavour"));  // the worker's own flavour and deadline apply
  EXPECT_FALSE(plain.contains("timeout_s"));
}

TEST(worker_protocol, build_response_round_trips_and_bad_ones_are_errors) {
  gp::build_response r;
  r.job_id = "b7";
  r.ok = false;
  r.log = "kernels/a.cu(3): error: identifier \"x\" is undefined";
  r.seconds = {{"total", 1.5}, {"kernels/a.cu", 1.2}};
  std::string err;
  auto back = gp::decode_build_response(gp::encode_build_response(r), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_FALSE(back->infra_error);
  EXPECT_FALSE(back->ok);
  EXPECT_EQ(back->log, r.log);
  EXPECT_DOUBLE_EQ(back->seconds.at("kernels/a.cu"), 1.2);

  gp::build_response infra;
  infra.infra_error = true;
  infra.error = "build: flavour must be cpu or cuda";
  back = gp::decode_build_response(gp::encode_build_response(infra), &err);
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->infra_error);
  EXPECT_EQ(back->error, infra.error);

  // An "ok" without a boolean "ok" (e.g. an eval verdict sent to the wrong caller) is malformed.
  auto wrong = nlohmann::json::to_msgpack(nlohmann::json{{"status", "ok"}, {"verdict", {}}});
  err.clear();
  EXPECT_FALSE(gp::decode_build_response(std::string(wrong.begin(), wrong.end()), &err));
  EXPECT_NE(err.find("\"ok\""), std::string::npos) << err;
}

TEST(worker_protocol, kernel_sources_are_translation_units_under_kernels) {
  EXPECT_TRUE(gp::has_kernel_sources({{"kernels/a.cu", ""}, {"model_new.py", ""}}));
  EXPECT_TRUE(gp::has_kernel_sources({{"kernels/sub/b.cpp", ""}}));
  EXPECT_FALSE(gp::has_kernel_sources({{"model_new.py", ""}}));
  EXPECT_FALSE(gp::has_kernel_sources({{"kernels/only.cuh", ""}, {"kernels/notes.md", ""}}));
  EXPECT_FALSE(gp::has_kernel_sources({{"other/a.cpp", ""}}));
}

TEST(worker_protocol, verdict_says_whether_the_build_was_cached) {
  gp::eval_response r;
  r.job_id = "j";
  r.result.cached_build = true;
  std::string err;
  auto back = gp::decode_response(gp::encode_response(r), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_TRUE(back->result.cached_build);
}
