// policy_text_tool: the text side of the policy from the command line, for
// parity tests against Hugging Face and for looking at tokenizations.
// Every command prints one JSON object on stdout; errors go to stderr with
// exit status 1.
//
//   policy_text_tool encode TOKENIZER_JSON TEXT_FILE [--add-special-tokens]
//   policy_text_tool encode-batch TOKENIZER_JSON STRINGS_JSON_FILE
//   policy_text_tool decode-batch TOKENIZER_JSON ID_LISTS_JSON_FILE
//   policy_text_tool render-chat TOKENIZER_JSON CONVERSATION_JSON_FILE [TEMPLATE_FILE [BOS_TOKEN] | MODEL_DIR]
//   policy_text_tool identify-template TEMPLATE_FILE_OR_MODEL_DIR
//   policy_text_tool parse-tool-calls TEXT_FILE
//   policy_text_tool bench TOKENIZER_JSON TEXT_FILE [REPEATS]
#include <iostream>
#include <string>
#include <vector>

#include "policy/text/policy_text_commands.hpp"

using namespace caf_agent::policy;

namespace {

int usage() {
  std::cerr << "usage: policy_text_tool encode|encode-batch|decode-batch|render-chat|identify-template|"
               "parse-tool-calls|bench ARGS...\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage();
  auto out = run_text_command(args);
  if (!out) {
    std::cerr << "policy_text_tool: " << out.error().message << "\n";
    return 1;
  }
  std::cout << *out << "\n";
  return 0;
}
