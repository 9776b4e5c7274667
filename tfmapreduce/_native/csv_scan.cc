// tfmapreduce's native kernels, CSV table family: a byte range of a CSV file decoded into typed, nullable columns
// (tmr.scan_csv; see tmr.h).
//
// Its op:
//
// TmrScanCsv(path: string, file: int64, start: int64, stop: int64) -> values: out_types, valid: columns * bool
//   The records of bytes [start, stop) of the CSV file `path` (`start` is a record's first byte; the file index
//   `file` only names it in errors), read by the kernel itself, split on `delimiter` (a field may be quoted: a
//   delimiter, a line break or a doubled quote "" inside quotes are the field's), each field converted to its
//   column's kind ("bool", "int8" ... "int64", "uint8" ... "uint32", "float16" ... "float64", "date",
//   "timestamp[s|ms|us|ns]", "string"): bools as bool, integers as int64, floats as double, dates as int32 days,
//   timestamps as int64 counts of their unit, strings as tf.string.  A record ends at a line break outside quotes
//   (a \r before it dropped); blank records are skipped; where `start` is 0 a UTF-8 BOM and (with `header`) the
//   first record are skipped.  An empty field, quoted or not, or one equal to a string of `null_values`, is null:
//   valid[i] false, its slot 0, false or "".  A value that is not of its column's kind fails with
//   "scan_csv bad record: file F byte B column C" (B the record's first byte in the file); a record with another
//   number of fields or a quote left open fails with tf.io.decode_csv's words ("Expect N fields but have M in
//   record", "Quoted field has to end with quote followed by delim or end").

#include <charconv>
#include <cstdlib>
#include <deque>

#include "absl/strings/match.h"
#include "tmr.h"

namespace tfmapreduce {

REGISTER_OP("TmrScanCsv")
    .Input("path: string")
    .Input("file: int64")
    .Input("start: int64")
    .Input("stop: int64")
    .Output("values: out_types")
    .Output("valid: columns * bool")
    .Attr("out_types: list({bool, int32, int64, double, string}) >= 0")
    .Attr("columns: int >= 0")
    .Attr("kinds: list(string) >= 0")
    .Attr("null_values: list(string) >= 0")
    .Attr("delimiter: string = ','")
    .Attr("header: bool = true")
    .SetIsStateful()  // it reads a file: never folded, never cached
    .SetShapeFn(VectorOutputs);

namespace {

// What a column's fields become (the kind's letter and, for integers and timestamps, its bounds or digits).
struct Kind {
  char code = 's';  // b bool, i integer, f float, d date, t timestamp, s string
  int64_t low = 0, high = 0;  // an integer kind's range
  int digits = 0;  // a timestamp's digits of a second's fraction
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool Digits(absl::string_view s, size_t at, size_t n, int64_t* out) {
  if (at + n > s.size()) return false;
  int64_t v = 0;
  for (size_t k = at; k < at + n; ++k) {
    if (!IsDigit(s[k])) return false;
    v = v * 10 + (s[k] - '0');
  }
  *out = v;
  return true;
}

bool EqualsLower(absl::string_view s, absl::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (size_t k = 0; k < s.size(); ++k) {
    const char c = s[k] >= 'A' && s[k] <= 'Z' ? static_cast<char>(s[k] + 32) : s[k];
    if (c != lower[k]) return false;
  }
  return true;
}

// An integer: [+-]?[0-9]+ within int64.
bool ParseInteger(absl::string_view s, int64_t* out) {
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
    if (!s.empty() && s.front() == '-') return false;
  }
  if (s.empty() || (s.size() == 1 && s.front() == '-')) return false;
  for (size_t k = s.front() == '-' ? 1 : 0; k < s.size(); ++k) {
    if (!IsDigit(s[k])) return false;
  }
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// A number: [+-]?(digits[.digits]|.digits)([eE][+-]?digits)? or [+-]?(nan|inf|infinity), any case.
bool ParseFloat(absl::string_view s, double* out) {
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  if (EqualsLower(s, "nan")) {
    *out = negative ? -std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (EqualsLower(s, "inf") || EqualsLower(s, "infinity")) {
    *out = negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return true;
  }
  size_t k = 0, before = 0, after = 0;
  while (k < s.size() && IsDigit(s[k])) ++k, ++before;
  if (k < s.size() && s[k] == '.') {
    ++k;
    while (k < s.size() && IsDigit(s[k])) ++k, ++after;
  }
  if (before == 0 && after == 0) return false;
  if (k < s.size() && (s[k] == 'e' || s[k] == 'E')) {
    ++k;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
    size_t exponent = 0;
    while (k < s.size() && IsDigit(s[k])) ++k, ++exponent;
    if (exponent == 0) return false;
  }
  if (k != s.size()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  if (ec != std::errc()) *out = std::strtod(std::string(s).c_str(), nullptr);  // out of range: inf or 0, as strtod
  if (negative) *out = -*out;
  return true;
}

// Days since 1970-01-01 of a YYYY-MM-DD date of the calendar (Howard Hinnant's days-from-civil).
bool ParseDate(absl::string_view s, int64_t* days) {
  int64_t y, m, d;
  if (s.size() < 10 || s[4] != '-' || s[7] != '-' || !Digits(s, 0, 4, &y) || !Digits(s, 5, 2, &m) ||
      !Digits(s, 8, 2, &d) || m < 1 || m > 12 || d < 1) {
    return false;
  }
  static constexpr int kLengths[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
  if (d > kLengths[m - 1] + (leap && m == 2 ? 1 : 0)) return false;
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  *days = era * 146097 + doe - 719468;
  return true;
}

// YYYY-MM-DD([T ]HH:MM(:SS(.f{1,digits})?)?)? as counts of 10^-digits seconds since the epoch.
bool ParseTimestamp(absl::string_view s, int digits, int64_t* out) {
  int64_t days, h = 0, m = 0, sec = 0, fraction = 0;
  if (!ParseDate(s.substr(0, 10), &days)) return false;
  if (s.size() > 10) {
    if ((s[10] != 'T' && s[10] != ' ') || s.size() < 16 || s[13] != ':' || !Digits(s, 11, 2, &h) ||
        !Digits(s, 14, 2, &m)) {
      return false;
    }
    if (s.size() > 16) {
      if (s.size() < 19 || s[16] != ':' || !Digits(s, 17, 2, &sec)) return false;
      if (s.size() > 19) {
        const size_t n = s.size() - 20;
        if (s[19] != '.' || n < 1 || static_cast<int>(n) > digits || !Digits(s, 20, n, &fraction)) return false;
        for (size_t k = n; k < static_cast<size_t>(digits); ++k) fraction *= 10;
      }
    }
    if (h >= 24 || m >= 60 || sec >= 60) return false;
  }
  int64_t scale = 1;
  for (int k = 0; k < digits; ++k) scale *= 10;
  *out = ((days * 24 + h) * 60 + m) * 60 * scale + sec * scale + fraction;
  return true;
}

Kind KindOf(const std::string& name) {
  Kind kind;
  if (name == "bool") {
    kind.code = 'b';
  } else if (name == "date") {
    kind.code = 'd';
  } else if (absl::StartsWith(name, "timestamp[")) {
    kind.code = 't';
    kind.digits = name == "timestamp[s]" ? 0 : name == "timestamp[ms]" ? 3 : name == "timestamp[us]" ? 6 : 9;
  } else if (absl::StartsWith(name, "float")) {
    kind.code = 'f';
  } else if (absl::StartsWith(name, "int") || absl::StartsWith(name, "uint")) {
    kind.code = 'i';
    const bool is_unsigned = name[0] == 'u';
    const int bits = std::atoi(name.c_str() + (is_unsigned ? 4 : 3));
    kind.low = is_unsigned ? 0 : bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1));
    kind.high = bits == 64 ? std::numeric_limits<int64_t>::max()
                           : (int64_t{1} << (is_unsigned ? bits : bits - 1)) - 1;
  }
  return kind;
}

// A column being filled: its values as one of these, and each row's validity.
struct Column {
  Kind kind;
  std::vector<int64_t> integers;  // i, t, d
  std::vector<double> floats;     // f
  std::vector<absl::string_view> strings;  // s: views of the range's text, or of `copies`
  std::deque<std::string> copies;          // s: the quoted fields with a doubled quote, unescaped
  std::vector<bool> flags;        // b
  std::vector<bool> valid;
};

}  // namespace

class ScanCsvOp : public OpKernel {
 public:
  explicit ScanCsvOp(OpKernelConstruction* context) : OpKernel(context) {
    std::vector<std::string> kinds, nulls;
    std::string delimiter;
    OP_REQUIRES_OK(context, context->GetAttr("kinds", &kinds));
    OP_REQUIRES_OK(context, context->GetAttr("null_values", &nulls));
    OP_REQUIRES_OK(context, context->GetAttr("delimiter", &delimiter));
    OP_REQUIRES_OK(context, context->GetAttr("header", &header_));
    OP_REQUIRES(context, delimiter.size() == 1, ::tensorflow::errors::InvalidArgument("delimiter: one byte"));
    delimiter_ = delimiter[0];
    for (const std::string& k : kinds) kinds_.push_back(KindOf(k));
    nulls_ = nulls;
  }

  void Compute(OpKernelContext* context) override {
    const std::string path(context->input(0).scalar<tstring>()());
    const int64_t file_index = context->input(1).scalar<int64_t>()();
    const int64_t start = context->input(2).scalar<int64_t>()();
    const int64_t stop = context->input(3).scalar<int64_t>()();
    OP_REQUIRES(context, 0 <= start && start <= stop, ::tensorflow::errors::InvalidArgument("bad byte range"));
    std::string text(static_cast<size_t>(stop - start), '\0');
    if (stop > start) {
      std::unique_ptr<::tensorflow::RandomAccessFile> file;
      OP_REQUIRES_OK(context, context->env()->NewRandomAccessFile(path, &file));
      OP_REQUIRES_OK(context, ReadExactly(*file, path, start, stop - start, stop, text.data()));
    }
    const size_t n = kinds_.size();
    std::vector<Column> columns(n);
    for (size_t j = 0; j < n; ++j) columns[j].kind = kinds_[j];
    std::vector<absl::string_view> fields;
    std::vector<bool> quoted;  // each field: a view of its scratch copy in `unquoted` (a doubled quote unescaped)
    std::vector<std::string> unquoted(n + 1);  // the last: fields past the header's
    const char* at = text.data();
    const char* const end = text.data() + text.size();
    if (start == 0 && text.size() >= 3 && std::memcmp(at, "\xEF\xBB\xBF", 3) == 0) at += 3;
    bool skip = header_ && start == 0;
    while (at < end) {
      const char* const record = at;
      fields.clear();
      quoted.clear();
      // One record's fields, each a view of the text or of its unquoted copy.
      bool done = false;
      while (!done) {
        const char* field = at;
        if (at < end && *at == '"') {
          // The closing quote: the first one not doubled.  A field without a doubled quote is a view of the text.
          const char* const inside = ++at;
          bool closed = false, escaped = false;
          while (at < end) {
            const char* quote = static_cast<const char*>(std::memchr(at, '"', end - at));
            if (quote == nullptr) break;
            if (quote + 1 < end && quote[1] == '"') {
              escaped = true;
              at = quote + 2;
              continue;
            }
            at = quote + 1;
            closed = true;
            break;
          }
          if (!closed) return Unsplit(context, "Quoted field has to end with quote followed by delim or end");
          absl::string_view value(inside, at - 1 - inside);
          if (escaped) {
            std::string& copy = unquoted[std::min(fields.size(), n)];
            copy.clear();
            for (size_t k = 0; k < value.size(); ++k) {
              copy.push_back(value[k]);
              if (value[k] == '"') ++k;  // the second of a doubled quote
            }
            value = copy;
          }
          quoted.push_back(escaped);
          fields.push_back(value);
          if (at < end && *at == '\r' && (at + 1 == end || at[1] == '\n')) ++at;
          if (at == end || *at == '\n') {
            done = true;
          } else if (*at != delimiter_) {
            return Unsplit(context, "Quoted field has to end with quote followed by delim or end");
          }
          ++at;
          continue;
        }
        while (at < end && *at != delimiter_ && *at != '\n') {
          if (*at == '"') return Unsplit(context, "Unquoted fields cannot have quotes/CRLFs inside");
          ++at;
        }
        absl::string_view value(field, at - field);
        done = at == end || *at == '\n';
        if (done && !value.empty() && value.back() == '\r') value.remove_suffix(1);
        quoted.push_back(false);
        fields.push_back(value);
        ++at;
      }
      if (fields.size() == 1 && fields[0].empty() && *record != '"') continue;  // a blank line
      if (skip) {
        skip = false;
        continue;
      }
      if (fields.size() != n) {
        return Unsplit(context, absl::StrCat("Expect ", n, " fields but have ", fields.size(), " in record"));
      }
      for (size_t j = 0; j < n; ++j) {
        if (!Add(columns[j], fields[j], quoted[j])) {
          context->SetStatus(::tensorflow::errors::InvalidArgument(
              "scan_csv bad record: file ", file_index, " byte ", start + (record - text.data()), " column ", j));
          return;
        }
      }
    }
    Output(context, columns);
  }

 private:
  static void Unsplit(OpKernelContext* context, const std::string& why) {
    context->SetStatus(::tensorflow::errors::InvalidArgument(why));
  }

  bool Null(absl::string_view field) const {
    if (field.empty()) return true;
    for (const std::string& spelling : nulls_) {
      if (field == spelling) return true;
    }
    return false;
  }

  // The field appended to its column; false where it is not of the column's kind.
  bool Add(Column& column, absl::string_view field, bool copied) const {
    const bool present = !Null(field);
    column.valid.push_back(present);
    const Kind& kind = column.kind;
    switch (kind.code) {
      case 's':
        if (!present) {
          column.strings.emplace_back();
        } else if (copied) {  // a view of the record's scratch copy: kept
          column.strings.emplace_back(column.copies.emplace_back(field));
        } else {
          column.strings.push_back(field);
        }
        return true;
      case 'b': {
        const bool yes = present && EqualsLower(field, "true");
        column.flags.push_back(yes);
        return !present || yes || EqualsLower(field, "false");
      }
      case 'f': {
        double v = 0;
        column.floats.push_back(0);
        if (!present) return true;
        if (!ParseFloat(field, &v)) return false;
        column.floats.back() = v;
        return true;
      }
      default: {
        int64_t v = 0;
        column.integers.push_back(0);
        if (!present) return true;
        const bool ok = kind.code == 'i' ? ParseInteger(field, &v) && v >= kind.low && v <= kind.high
                        : kind.code == 'd' ? ParseDate(field, &v) && field.size() == 10
                                           : ParseTimestamp(field, kind.digits, &v);
        column.integers.back() = v;
        return ok;
      }
    }
  }

  void Output(OpKernelContext* context, std::vector<Column>& columns) const {
    const size_t n = columns.size();
    for (size_t j = 0; j < n; ++j) {
      Column& c = columns[j];
      const int64_t rows = static_cast<int64_t>(c.valid.size());
      Tensor* values = nullptr;
      Tensor* valid = nullptr;
      OP_REQUIRES_OK(context, context->allocate_output(static_cast<int>(j), TensorShape({rows}), &values));
      OP_REQUIRES_OK(context, context->allocate_output(static_cast<int>(n + j), TensorShape({rows}), &valid));
      auto flags = valid->flat<bool>();
      for (int64_t r = 0; r < rows; ++r) flags(r) = c.valid[r];
      switch (c.kind.code) {
        case 's': {
          auto out = values->flat<tstring>();
          for (int64_t r = 0; r < rows; ++r) out(r).assign(c.strings[r].data(), c.strings[r].size());
          break;
        }
        case 'b': {
          auto out = values->flat<bool>();
          for (int64_t r = 0; r < rows; ++r) out(r) = c.flags[r];
          break;
        }
        case 'f':
          std::copy(c.floats.begin(), c.floats.end(), values->flat<double>().data());
          break;
        case 'd': {
          auto out = values->flat<int32_t>();
          for (int64_t r = 0; r < rows; ++r) out(r) = static_cast<int32_t>(c.integers[r]);
          break;
        }
        default:
          std::copy(c.integers.begin(), c.integers.end(), values->flat<int64_t>().data());
      }
    }
  }

  std::vector<Kind> kinds_;
  std::vector<std::string> nulls_;
  char delimiter_ = ',';
  bool header_ = true;
};

REGISTER_KERNEL_BUILDER(Name("TmrScanCsv").Device(::tensorflow::DEVICE_CPU), ScanCsvOp);

}  // namespace tfmapreduce
