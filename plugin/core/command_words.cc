#include "plugin/core/command_words.h"

namespace ncclwatch::plugin {

bool SplitCommand(const std::string& text, std::vector<std::string>* words, std::string* error) {
  words->clear();
  std::string cur;
  bool in_word = false;  // a word has begun (possibly empty: '')
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words->push_back(cur);
      cur.clear();
      in_word = false;
      ++i;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (i + 1 == n) {
        *error = "a backslash ends it (byte " + std::to_string(i) + "): it escapes nothing";
        return false;
      }
      cur += text[i + 1];
      i += 2;
    } else if (c == '\'') {
      const size_t close = text.find('\'', i + 1);
      if (close == std::string::npos) {
        *error = "the single quote at byte " + std::to_string(i) + " is never closed";
        return false;
      }
      cur.append(text, i + 1, close - i - 1);
      i = close + 1;
    } else if (c == '"') {
      size_t j = i + 1;
      for (;;) {
        if (j == n) {
          *error = "the double quote at byte " + std::to_string(i) + " is never closed";
          return false;
        }
        if (text[j] == '"') break;
        if (text[j] == '\\' && j + 1 < n && (text[j + 1] == '"' || text[j + 1] == '\\')) {
          cur += text[j + 1];
          j += 2;
          continue;
        }
        cur += text[j++];
      }
      i = j + 1;
    } else {
      cur += c;
      ++i;
    }
  }
  if (in_word) words->push_back(cur);
  if (words->empty()) {
    *error = "it holds no word";
    return false;
  }
  if ((*words)[0].empty()) {
    *error = "its first word, the program, is empty";
    return false;
  }
  return true;
}

std::string ExpandWord(const std::string& word, pid_t pid, int64_t rank, const std::string& trace_path) {
  std::string out;
  for (size_t i = 0; i < word.size(); ++i) {
    const char c = word[i];
    if (c != '%' || i + 1 == word.size()) {
      out += c;
      continue;
    }
    const char n = word[++i];
    if (n == 'p') out += std::to_string(pid);
    else if (n == 'r') out += std::to_string(rank);
    else if (n == 'f') out += trace_path;
    else if (n == '%') out += '%';
    else (out += '%') += n;
  }
  return out;
}

std::string QuoteWords(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    out += '\'';
    for (char c : w) {
      if (c == '\'') out += "'\\''";
      else out += c;
    }
    out += '\'';
  }
  return out;
}

}  // namespace ncclwatch::plugin
