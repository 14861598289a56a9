// serving/engine_chat_service.cpp: see engine_chat_service.hpp.
#include "serving/engine_chat_service.hpp"

#include <algorithm>
#include <random>
#include <span>

#include "policy/text/stop_strings.hpp"
#include "policy/text/tool_call_parser.hpp"

namespace caf_agent::serving {

namespace {

// Qwen's end-of-text token, which a model may emit instead of its end of turn.
constexpr std::string_view end_of_text = "<|endoftext|>";

uint64_t random_seed() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

serving_error submit_error(const std::string& message) {
  if (message.find("busy") != std::string::npos) return make_serving_error(errc::busy, message);
  if (message.find("stopped") != std::string::npos) return make_serving_error(errc::unavailable, message);
  return make_serving_error(errc::bad_request, message);
}

// The sampled tokens as a response: text, tool calls, finish reason, logprobs, usage.
chat_response make_response(const policy::tokenizer& tok, const policy::chat_format& format, const std::string& model,
                            const std::vector<std::string>& stop, std::vector<int32_t> prompt,
                            const policy::generation_result& g) {
  chat_response out;
  out.model = model;
  out.token_ids = g.tokens;
  out.logprobs = g.logprobs;
  out.token_texts.reserve(g.tokens.size());
  for (const auto& t : g.tokens) out.token_texts.push_back(tok.decode_bytes(std::span(&t, 1)));
  std::span<const int32_t> body(g.tokens);
  if (g.reason == policy::finish_reason::stop_token && !body.empty()) body = body.first(body.size() - 1);
  out.raw_text = tok.decode(body);
  std::string text = out.raw_text;
  if (g.reason == policy::finish_reason::stop_string) {
    // OpenAI's rule: the text ends before the first stop string.
    size_t cut = text.size();
    for (const auto& s : stop) cut = std::min(cut, text.find(s));
    text.resize(cut);
  }
  const bool truncated =
      g.reason == policy::finish_reason::max_new_tokens || g.reason == policy::finish_reason::context_limit;
  auto turn = policy::parse_assistant_turn(format, text);
  const bool calls_ok =
      !turn.calls.empty() && std::all_of(turn.calls.begin(), turn.calls.end(), [](const auto& c) { return c.ok; });
  if (calls_ok) {
    out.content = std::move(turn.content);
    for (auto& c : turn.calls) out.tool_calls.push_back(policy::tool_call{std::move(c.name), std::move(c.arguments)});
    out.finish_reason = truncated ? "length" : "tool_calls";
  } else {
    // A call that does not parse stays in the text: the agent's own parser turns it into an
    // error observation, which is the feedback the policy should learn from.
    out.content = std::move(text);
    out.finish_reason = truncated ? "length" : "stop";
  }
  out.policy_version = g.policy_version;
  out.prompt_tokens = static_cast<int32_t>(prompt.size());
  out.completion_tokens = static_cast<int32_t>(g.tokens.size());
  out.prompt_token_ids = std::move(prompt);
  return out;
}

}  // namespace

result<std::unique_ptr<engine_chat_service>> engine_chat_service::create(std::shared_ptr<policy::engine_service> engine,
                                                                         policy::tokenizer tokenizer,
                                                                         std::string model_name,
                                                                         policy::chat_format format) {
  if (!engine) return make_serving_error(errc::internal, "engine_chat_service: no engine");
  const auto end = tokenizer.token_to_id(format.im_end);
  if (!end)
    return make_serving_error(errc::internal, "engine_chat_service: the tokenizer has no " + format.im_end +
                                                  " token (the end of turn of chat format " + format.name + ")");
  if (tokenizer.id_limit() > static_cast<size_t>(engine->vocab_size()))
    return make_serving_error(
        errc::internal, "engine_chat_service: the tokenizer has ids up to " + std::to_string(tokenizer.id_limit() - 1) +
                            " but the model's vocabulary is " + std::to_string(engine->vocab_size()));
  std::vector<int32_t> stop_ids{*end};
  if (auto eot = tokenizer.token_to_id(end_of_text)) stop_ids.push_back(*eot);
  return std::unique_ptr<engine_chat_service>(new engine_chat_service(
      std::move(engine), std::move(tokenizer), std::move(model_name), std::move(stop_ids), std::move(format)));
}

engine_chat_service::engine_chat_service(std::shared_ptr<policy::engine_service> engine, policy::tokenizer tokenizer,
                                         std::string model_name, std::vector<int32_t> stop_ids,
                                         policy::chat_format format)
    : engine_(std::move(engine)),
      tokenizer_(std::move(tokenizer)),
      model_name_(std::move(model_name)),
      stop_ids_(std::move(stop_ids)),
      format_(std::move(format)) {}

std::vector<int32_t> engine_chat_service::prompt_tokens(const chat_request& request) const {
  const std::vector<policy::chat_message> plain(request.messages.begin(), request.messages.end());
  return tokenizer_.encode(policy::render_chat(format_, plain, request.tools, /*add_generation_prompt=*/true));
}

void engine_chat_service::complete(chat_request request, chat_handler done) {
  auto prompt = prompt_tokens(request);
  const auto context = static_cast<size_t>(engine_->max_context());
  if (prompt.size() >= context) {
    done(make_serving_error(errc::bad_request,
                            "messages: the prompt is " + std::to_string(prompt.size()) +
                                " tokens but the model's context is " + std::to_string(context) +
                                " tokens (prompt plus generated); shorten the conversation",
                            "messages"));
    return;
  }
  policy::generation_request gen;
  gen.prompt = prompt;
  gen.max_new_tokens = request.max_tokens;
  gen.sampling = policy::sampling_params{request.temperature, request.top_p, request.top_k};
  gen.stop_token_ids = stop_ids_;
  gen.seed = request.seed ? *request.seed : random_seed();
  if (!request.stop.empty()) gen.stop_check = policy::watch_stop_strings(tokenizer_, request.stop);
  // The callback holds copies, not `this`: the engine may be shared and outlive this service.
  auto submitted = engine_->submit(
      std::move(gen), [tok = tokenizer_, fmt = format_, model = model_name_, stop = std::move(request.stop),
                       prompt = std::move(prompt), done](policy::generation_result r, std::string error) {
        if (!error.empty())
          return done(error.find("stopped") != std::string::npos
                          ? make_serving_error(errc::unavailable, error)
                          : make_serving_error(errc::internal, "generation failed: " + error));
        if (r.reason == policy::finish_reason::aborted)
          return done(make_serving_error(errc::unavailable, "generation was aborted"));
        done(make_response(tok, fmt, model, stop, prompt, r));
      });
  if (!submitted) done(submit_error(submitted.error().message));
}

status engine_chat_service::reload(const std::string& model_path, uint64_t version) {
  auto loaded = engine_->load_weights(model_path, version);
  if (!loaded) return make_serving_error(errc::bad_request, "reload: " + loaded.error().message, "model_path");
  return {};
}

}  // namespace caf_agent::serving
