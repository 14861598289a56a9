// tests/messages/roundtrip_test.cpp: every registered message type survives CAF's
// binary serializer (also inside a caf::message, as it crosses nodes) and msgpack.
//
// The Debian CAF 0.17.6 build has no compile-time type-id checks, so this test is
// what catches a type that was added to a struct but not to the block, or a field
// missing from a field list.

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>
#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <nlohmann/json.hpp>

#include "messages/type_ids.hpp"

namespace msgs = caf_agent::messages;

namespace {

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};
template <class T>
struct is_map : std::false_type {};
template <class K, class V>
struct is_map<std::map<K, V>> : std::true_type {};

/// Gives every field a value that differs from its default, recursively.
struct filler {
  int seed = 1;

  template <class T>
  void fill(T& x) {
    ++seed;
    if constexpr (std::is_same_v<T, bool>) {
      x = !x;
    } else if constexpr (msgs::named_enum<T>) {  // the next value (the default is the first)
      x = static_cast<T>((static_cast<std::size_t>(x) + 1) % std::size(msgs::enum_names<T>::names));
    } else if constexpr (std::is_arithmetic_v<T>) {
      x = static_cast<T>(seed * 3 + 1);
    } else if constexpr (std::is_same_v<T, std::string>) {
      x = "v" + std::to_string(seed) + std::string("\0\xff", 2) + "\xe2\x9c\x93";
    } else if constexpr (is_vector<T>::value) {
      x.resize(2);
      for (auto& e : x) fill(e);
    } else if constexpr (is_map<T>::value) {
      typename T::key_type k{};
      fill(k);
      fill(x[k]);
    } else {
      static_assert(msgs::has_fields<T>, "field type without a filler");
      x.apply_fields([this](auto&... fs) {
        (fill(fs), ...);
        return 0;
      });
    }
  }
};

template <class T>
T filled() {
  T x;
  filler{}.fill(x);
  return x;
}

struct roundtrip : ::testing::Test {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  void SetUp() override {
    cfg.add_message_types<caf::id_block::caf_agent>();
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

template <class T>
void check_caf(caf::actor_system& sys, const char* name) {
  auto original = filled<T>();
  ASSERT_FALSE(original == T{}) << name << ": filler left it at its default";
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  ASSERT_FALSE(sink(original)) << name;
  T copy;
  caf::binary_deserializer source{sys, buf};
  ASSERT_FALSE(source(copy)) << name;
  EXPECT_TRUE(copy == original) << name << ": CAF round trip changed it";
  // As a message, the way it crosses nodes: needs the type-id registration.
  auto msg = caf::make_message(original);
  std::vector<char> mbuf;
  caf::binary_serializer msink{sys, mbuf};
  ASSERT_FALSE(msink(msg)) << name << ": not serializable inside a message";
  caf::message back;
  caf::binary_deserializer msource{sys, mbuf};
  ASSERT_FALSE(msource(back)) << name << ": not deserializable inside a message";
  ASSERT_TRUE(back.match_elements<T>()) << name << ": came back as another type";
  EXPECT_TRUE(back.get_as<T>(0) == original) << name;
}

template <class T>
void check_msgpack(const char* name) {
  auto original = filled<T>();
  msgpack::sbuffer buf;
  msgpack::pack(buf, original);
  auto handle = msgpack::unpack(buf.data(), buf.size());
  T copy;
  handle.get().convert(copy);
  EXPECT_TRUE(copy == original) << name << ": msgpack round trip changed it";
}

}  // namespace

#define CHECK_CAF(name) check_caf<msgs::name>(*sys, #name);
#define CHECK_MSGPACK(name) check_msgpack<msgs::name>(#name);

TEST_F(roundtrip, every_registered_type_through_caf){CAF_AGENT_MESSAGE_TYPES(CHECK_CAF)}

TEST_F(roundtrip, every_registered_type_through_msgpack){CAF_AGENT_MESSAGE_TYPES(CHECK_MSGPACK)}

TEST_F(roundtrip, type_ids_are_distinct_and_named) {
  std::vector<caf::type_id_t> ids;
#define COLLECT(name) ids.push_back(caf::type_id<msgs::name>::value);
  CAF_AGENT_MESSAGE_TYPES(COLLECT)
#undef COLLECT
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
  EXPECT_EQ(ids.front(), caf::first_custom_type_id);
  EXPECT_EQ(ids.back() + 1, caf::id_block::caf_agent::end);
}

TEST_F(roundtrip, truncated_buffer_is_an_error_not_a_crash) {
  auto original = filled<msgs::trajectory_record>();
  std::vector<char> buf;
  caf::binary_serializer sink{*sys, buf};
  ASSERT_FALSE(sink(original));
  buf.resize(buf.size() / 2);
  msgs::trajectory_record copy;
  caf::binary_deserializer source{*sys, buf};
  EXPECT_TRUE(static_cast<bool>(source(copy)));
}

namespace {

/// tool_response as it was before its status was an enum (protocol 4): the same map, a string.
struct tool_response_v4 {
  std::string call_id = "c1";
  std::string output = "out";
  std::string status;
  int32_t exit_code = 0;
  double elapsed_ms = 1.5;
  MSGPACK_DEFINE_MAP(call_id, output, status, exit_code, elapsed_ms)
};

template <class Old, class New>
New reread(const Old& old) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, old);
  auto handle = msgpack::unpack(buf.data(), buf.size());
  New out;
  handle.get().convert(out);
  return out;
}

}  // namespace

// Named enums are written as their names, which are the strings the fields held before: what
// was written then reads the same, and an unknown name is an error, never a silent default.
TEST(named_enums, old_string_fields_read_as_enums_and_enums_write_their_names) {
  for (auto name : msgs::enum_names<msgs::tool_status>::names) {
    tool_response_v4 old;
    old.status = std::string(name);
    auto now = reread<tool_response_v4, msgs::tool_response>(old);
    EXPECT_EQ(msgs::name_of(now.status), name);
    EXPECT_EQ(now.output, "out");
    EXPECT_EQ((reread<msgs::tool_response, tool_response_v4>(now).status), name);  // and back
  }
  tool_response_v4 bad;
  bad.status = "exploded";
  EXPECT_THROW((reread<tool_response_v4, msgs::tool_response>(bad)), msgpack::type_error);
}

TEST(named_enums, json_and_text_use_the_names) {
  nlohmann::json j = msgs::eval_status::task_error;
  EXPECT_EQ(j, "task_error");
  EXPECT_EQ(nlohmann::json("final").get<msgs::eval_mode>(), msgs::eval_mode::final);
  EXPECT_THROW((void)nlohmann::json("fast").get<msgs::eval_mode>(), std::invalid_argument);
  EXPECT_EQ(msgs::to_string(msgs::completion_finish::length), "length");
  EXPECT_EQ(msgs::parse_name<msgs::tool_status>("killed"), msgs::tool_status::killed);
  EXPECT_FALSE(msgs::parse_name<msgs::tool_status>("Killed"));
  EXPECT_EQ(msgs::names_list<msgs::eval_mode>(), "verify, profile, final, baseline");
  msgs::eval_result r;
  r.status = msgs::eval_status::infra_error;
  EXPECT_NE(caf::deep_to_string(r).find("infra_error"), std::string::npos) << caf::deep_to_string(r);
}

namespace {

/// episode_done as it was before its termination was an enum (protocol 6): the same map, a string.
struct episode_done_v6 {
  uint64_t episode_id = 7;
  std::string task_id = "t";
  std::string termination;
  std::string reason;
  int32_t reward = 2;
  int32_t turns = 3;
  MSGPACK_DEFINE_MAP(episode_id, task_id, termination, reason, reward, turns)
};

}  // namespace

TEST(named_enums, a_termination_written_as_a_string_reads_as_episode_end) {
  for (auto name : {"finished", "turn_limit", "context_limit", "wall_limit", "aborted"}) {
    episode_done_v6 old;
    old.termination = name;
    auto now = reread<episode_done_v6, msgs::episode_done>(old);
    EXPECT_EQ(msgs::name_of(now.termination), name);
    EXPECT_EQ(now.reward, 2);
    EXPECT_EQ((reread<msgs::episode_done, episode_done_v6>(now).termination), name);  // and back
  }
  episode_done_v6 bad;
  bad.termination = "gave_up";
  EXPECT_THROW((reread<episode_done_v6, msgs::episode_done>(bad)), msgpack::type_error);
  EXPECT_EQ(nlohmann::json(msgs::episode_end::wall_limit), "wall_limit");
}

namespace {

/// node_info as it was before its role was an enum (protocol 9): the same map, a string.
struct node_info_v9 {
  std::string node_id = "gpu-pool@h:1";
  std::string role;
  std::string host = "h";
  int32_t pid = 1;
  MSGPACK_DEFINE_MAP(node_id, role, host, pid)
};

}  // namespace

TEST(named_enums, a_role_written_as_a_string_reads_as_node_role) {
  for (auto name : {"coordinator", "rollout", "gpu-pool", "learner", "inference", "inspector", "local"}) {
    node_info_v9 old;
    old.role = name;
    auto now = reread<node_info_v9, msgs::node_info>(old);
    EXPECT_EQ(msgs::name_of(now.role), name);
    EXPECT_EQ(now.host, "h");
    EXPECT_EQ((reread<msgs::node_info, node_info_v9>(now).role), name);  // and back
  }
  EXPECT_EQ(msgs::parse_name<msgs::node_role>("gpu-pool"), msgs::node_role::gpu_pool);
  node_info_v9 bad;
  bad.role = "wizard";
  EXPECT_THROW((reread<node_info_v9, msgs::node_info>(bad)), msgpack::type_error);
  EXPECT_THROW((void)nlohmann::json("wizard").get<msgs::node_role>(), std::invalid_argument);
  EXPECT_EQ(msgs::names_list<msgs::node_role>(),
            "coordinator, rollout, gpu-pool, learner, inference, inspector, local");
}

namespace {

/// train_batch as it was before its stage was an enum (protocol 10): the same map, a string.
struct train_batch_v10 {
  uint64_t batch_id = 4;
  int32_t attempt = 1;
  std::string stage;
  MSGPACK_DEFINE_MAP(batch_id, attempt, stage)
};

}  // namespace

TEST(named_enums, a_learner_stage_written_as_a_string_reads_as_learner_stage) {
  for (auto name : {"ppo", "rft", "vp"}) {
    train_batch_v10 old;
    old.stage = name;
    auto now = reread<train_batch_v10, msgs::train_batch>(old);
    EXPECT_EQ(msgs::name_of(now.stage), name);
    EXPECT_EQ(now.batch_id, 4U);
    EXPECT_EQ((reread<msgs::train_batch, train_batch_v10>(now).stage), name);  // and back
  }
  train_batch_v10 bad;
  bad.stage = "value_pretrain";  // a [train] stage's name, not a learner stage
  EXPECT_THROW((reread<train_batch_v10, msgs::train_batch>(bad)), msgpack::type_error);
  EXPECT_THROW((void)nlohmann::json("sft").get<msgs::learner_stage>(), std::invalid_argument);
  EXPECT_EQ(nlohmann::json(msgs::learner_stage::vp), "vp");
}

TEST(named_enums, an_episode_s_policy_is_named_on_the_wire_and_in_json) {
  msgs::start_episode s;
  EXPECT_EQ(s.policy, msgs::episode_policy::node);  // the default: the node's policy server
  s.policy = msgs::episode_policy::demonstrations;
  EXPECT_EQ((reread<msgs::start_episode, msgs::start_episode>(s).policy), msgs::episode_policy::demonstrations);
  EXPECT_EQ(nlohmann::json(msgs::episode_policy::demonstrations), "demonstrations");
  EXPECT_EQ(nlohmann::json("node").get<msgs::episode_policy>(), msgs::episode_policy::node);
  try {
    (void)nlohmann::json("replay").get<msgs::episode_policy>();
    FAIL() << "an unknown policy name was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("node, demonstrations"), std::string::npos) << e.what();
  }
}

// The inspector's views: get_view carries the enum; the command line and JSON hold the names the
// field had as a string, and an unknown name is an error naming the views.
TEST(named_enums, a_view_is_named_on_the_command_line_and_typed_on_the_wire) {
  for (auto name : msgs::enum_names<msgs::view_kind>::names) {
    auto v = msgs::parse_name<msgs::view_kind>(name);
    ASSERT_TRUE(v) << name;
    EXPECT_EQ(msgs::to_string(*v), name);
    msgs::get_view req{*v, "7"};
    EXPECT_EQ((reread<msgs::get_view, msgs::get_view>(req)), req);
  }
  EXPECT_EQ(msgs::parse_name<msgs::view_kind>("prometheus"), msgs::view_kind::prometheus);
  EXPECT_FALSE(msgs::parse_name<msgs::view_kind>("bogus"));
  EXPECT_EQ(msgs::names_list<msgs::view_kind>(),
            "nodes, actors, episodes, gpu, queues, train, run, episode, metrics, prometheus");
  try {
    (void)nlohmann::json("gpus").get<msgs::view_kind>();
    FAIL() << "an unknown view name was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("(one of: nodes, actors,"), std::string::npos) << e.what();
  }
}

// Service names: a kind's name, a learner shard's with its rank; what the services announced as
// strings before (the names on the wire are unchanged) reads back as the kind.
TEST(named_enums, a_service_name_is_its_kind_s_name_and_a_learner_shard_s_has_its_rank) {
  using msgs::service_kind;
  EXPECT_EQ(msgs::service_name(service_kind::gpu_pool), "gpu_pool");
  EXPECT_EQ(msgs::service_name(service_kind::rollout), "rollout");
  EXPECT_EQ(msgs::service_name(service_kind::policy), "policy");
  EXPECT_EQ(msgs::service_name(service_kind::learner, 3), "learner/3");
  for (auto name : {"gpu_pool", "rollout", "policy", "learner/0", "learner/12"}) {
    auto id = msgs::parse_service_name(name);
    ASSERT_TRUE(id) << name;
    EXPECT_EQ(id->kind == service_kind::learner ? msgs::service_name(id->kind, id->rank) : msgs::service_name(id->kind),
              name);
  }
  EXPECT_EQ(msgs::parse_service_name("learner/12")->rank, 12);
  EXPECT_TRUE(msgs::is_service("rollout", service_kind::rollout));
  EXPECT_FALSE(msgs::is_service("rollout", service_kind::gpu_pool));
  EXPECT_TRUE(msgs::is_service("learner/2", service_kind::learner));
  for (auto bad : {"", "pool", "store", "Rollout", "learner", "learner/", "learner/x", "learner/-1", "learner/1x",
                   "rollout/1", "gpu_pool/"})
    EXPECT_FALSE(msgs::parse_service_name(bad)) << bad;
}
