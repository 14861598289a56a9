#pragma once
// serving/engine_chat_service.hpp: the chat_service of the inference role: the checkpoint's
// chat format and tokenizer (policy/text) in front of the LibTorch generation engine
// (policy::engine_service). No torch types in this header.

#include <memory>
#include <string>

#include "policy/model/engine_service.hpp"
#include "policy/text/chat_format.hpp"
#include "policy/text/tokenizer.hpp"
#include "serving/chat_service.hpp"

namespace caf_agent::serving {

/// Renders a request with the chat format (the checkpoint's own template: policy::
/// checkpoint_chat_format), generates with the engine (stop tokens: the format's end of turn
/// and <|endoftext|> where the tokenizer has it, and the request's stop strings), and splits
/// the sampled text into content and tool calls as that format writes them. Thread-safe; the
/// engine may be shared with other users.
class engine_chat_service final : public chat_service {
 public:
  /// Fails when the tokenizer lacks the format's end-of-turn token (`format.im_end`) or has
  /// ids beyond the model's vocabulary.
  static result<std::unique_ptr<engine_chat_service>> create(std::shared_ptr<policy::engine_service> engine,
                                                             policy::tokenizer tokenizer, std::string model_name,
                                                             policy::chat_format format);

  /// Prompts that leave no room in the context are bad_request (400) naming the sizes;
  /// a full engine queue is busy (503); a device error is internal (500).
  void complete(chat_request request, chat_handler done) override;
  /// engine_service::load_weights: a bad checkpoint or an older version is bad_request.
  status reload(const std::string& model_path, uint64_t version) override;
  /// The name given to create().
  std::string model_name() const override { return model_name_; }

  /// The prompt token ids of a request: render_chat(format, ..., add_generation_prompt) encoded.
  std::vector<int32_t> prompt_tokens(const chat_request& request) const;

 private:
  engine_chat_service(std::shared_ptr<policy::engine_service> engine, policy::tokenizer tokenizer,
                      std::string model_name, std::vector<int32_t> stop_ids, policy::chat_format format);

  std::shared_ptr<policy::engine_service> engine_;
  policy::tokenizer tokenizer_;
  std::string model_name_;
  std::vector<int32_t> stop_ids_;
  policy::chat_format format_;
};

}  // namespace caf_agent::serving
