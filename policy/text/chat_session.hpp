#pragma once
// An episode's token sequence, built incrementally: the prompt once, then per
// turn the assistant's sampled tokens verbatim and the observation's tokens
// plus the next generation prompt. The loss mask is 1 exactly on sampled
// tokens.
//
// Equality with rendering the whole conversation at once: every chunk
// boundary sits next to a special token (<|im_start|>, <|im_end|>), which the
// tokenizer never merges across, except the start of each assistant body,
// right after "<|im_start|>assistant\n". There the sampled tokens are kept as
// sampled; re-tokenizing the full text may split differently when the body
// starts with whitespace or when the policy chose a non-canonical split.
//
// The pieces follow fmt's family (chat_format.hpp). Qwen3 renders earlier
// assistant turns without their thinking in a full rendering, so a Qwen3
// session (which keeps what was sampled) differs from it after the first
// assistant turn by design; each prompt it sends is still exact.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "policy/text/chat_format.hpp"
#include "policy/text/result.hpp"
#include "policy/text/tokenizer.hpp"

namespace caf_agent::policy {

/// What a span of the session's tokens is.
enum class turn_kind : uint8_t {
  prompt,       ///< system header, first messages, generation prompt
  assistant,    ///< tokens sampled by the policy (plus an added <|im_end|>)
  observation,  ///< tool results / user messages and the next generation prompt
  closing,      ///< the final newline after the last <|im_end|>
};

/// Name of a turn kind ("prompt", "assistant", ...).
const char* turn_kind_name(turn_kind k);

/// One turn: a half-open range of token positions.
struct turn_span {
  /// What the tokens are.
  turn_kind kind;
  /// First token position.
  size_t begin;
  /// One past the last token position.
  size_t end;
};

/// The token ids of one episode, grown turn by turn.
class chat_session {
 public:
  /// Renders the system header (with tools), the prompt messages (a leading
  /// system message replaces the default system text) and the generation
  /// prompt. Fails if the tokenizer lacks <|im_start|> or <|im_end|>, or a
  /// prompt message is an assistant message.
  static result<chat_session> start(tokenizer tok, std::span<const chat_message> prompt, const json_array& tools,
                                    chat_format fmt = {});

  /// Appends sampled tokens verbatim (mask 1). If they do not end with
  /// <|im_end|> (length cut), an <|im_end|> is added with mask 0.
  status append_sampled(std::span<const token_id> sampled);

  /// Appends tool results / user messages after an assistant turn, then the
  /// next generation prompt (all mask 0).
  status append_observation(std::span<const chat_message> msgs);

  /// Ends the conversation after the final assistant turn (the newline that
  /// follows <|im_end|> in the full rendering).
  status close();

  /// All token ids so far.
  const std::vector<token_id>& tokens() const { return tokens_; }
  /// 1 where the policy sampled the token, else 0; same length as tokens().
  const std::vector<uint8_t>& loss_mask() const { return mask_; }
  /// The turns in order; they tile [0, tokens().size()).
  const std::vector<turn_span>& turns() const { return turns_; }
  /// True while the session expects sampled tokens next.
  bool awaiting_assistant() const { return awaiting_assistant_; }
  /// The id of <|im_end|> (the policy's stop token).
  token_id im_end_id() const { return im_end_id_; }

 private:
  chat_session(tokenizer tok, chat_format fmt, token_id im_end);
  void push(turn_kind kind, std::span<const token_id> ids, uint8_t mask);

  tokenizer tok_;
  chat_format fmt_;
  token_id im_end_id_;
  std::vector<token_id> tokens_;
  std::vector<uint8_t> mask_;
  std::vector<turn_span> turns_;
  bool awaiting_assistant_ = true;
  bool closed_ = false;
};

}  // namespace caf_agent::policy
