// tfmapreduce's native kernels, Parquet family: row groups of a Parquet file decoded into tensors (see tmr.h).
//
// Built against the Arrow and Parquet C++ libraries that the pyarrow wheel ships (its headers and its libarrow,
// libparquet), so this family builds only where pyarrow is installed (see loader.py's EXTRA).
//
// Its ops:
//
// TmrReadParquet(path: string, row_groups: int64[k]) -> values: out_types, valid: bool (one of each per column)
//   The columns `columns` (indices of the file's top-level fields) of the row groups `row_groups` of the Parquet
//   file `path`, in that order, decoded by parquet::arrow::FileReader: numbers and bools as their own type (half
//   for float16), strings and binaries (dictionary-encoded or not) as tf.string, date32 as int32 days, timestamps
//   as int64 counts of their unit, decimals (128 and 256 bits) as double (the unscaled integer / 10^scale, rounded to
//   the nearest double).  valid[i] is each row's validity in column i; a null's slot holds 0 or "".  A
//   column whose type is not `out_types`' one fails naming the file and the column.
//
// TmrEncodeParquet(values: in_types, valid: n * bool) -> contents: string
//   The columns `values` (rows as vectors of one length), named `names`, of the logical types `kinds` ("int64",
//   "float16", "string", "date", "timestamp[ms]", ...), as the bytes of one Parquet file (snappy, row groups of
//   `row_group_rows` rows, the Arrow schema stored, so dates and timestamps read back as such); a row whose valid[i]
//   is false is a null in column i where nullable[i] (the column is written as required where it is not).

#include "arrow/api.h"
#include "arrow/io/file.h"
#include "arrow/io/memory.h"
#include "parquet/arrow/reader.h"
#include "parquet/arrow/writer.h"
#include "parquet/exception.h"
#include "tmr.h"

namespace tfmapreduce {

REGISTER_OP("TmrReadParquet")
    .Input("path: string")
    .Input("row_groups: int64")
    .Output("values: out_types")
    .Output("valid: n * bool")
    .Attr("out_types: list({bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, half, float, double, "
          "string}) >= 1")
    .Attr("n: int >= 1")
    .Attr("columns: list(int) >= 1")
    .SetShapeFn(VectorOutputs);

REGISTER_OP("TmrEncodeParquet")
    .Input("values: in_types")
    .Input("valid: n * bool")
    .Output("contents: string")
    .Attr("in_types: list({bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, half, float, double, "
          "string}) >= 1")
    .Attr("n: int >= 1")
    .Attr("names: list(string) >= 1")
    .Attr("kinds: list(string) >= 1")
    .Attr("nullable: list(bool) >= 1")
    .Attr("row_group_rows: int = 1048576")
    .SetShapeFn(::tensorflow::shape_inference::ScalarShape);

namespace {

// An Arrow status as a TensorFlow one that names the file.
absl::Status FromArrow(const arrow::Status& status, const std::string& path) {
  if (status.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("reading the Parquet file ", path, ": ", status.ToString()));
}

// Copies the fixed-width values of `array` (Arrow type A, TF element type T) into out[offset...], 0 where null.
template <typename A, typename T>
void CopyFixed(const arrow::Array& array, T* out) {
  const auto& typed = static_cast<const A&>(array);
  const auto* raw = typed.raw_values();
  static_assert(sizeof(*raw) == sizeof(T));
  std::memcpy(out, raw, sizeof(T) * array.length());
  if (array.null_count() > 0) {
    for (int64_t i = 0; i < array.length(); ++i) {
      if (array.IsNull(i)) std::memset(out + i, 0, sizeof(T));
    }
  }
}

template <typename B>
void CopyBinary(const arrow::Array& array, tstring* out) {
  const auto& typed = static_cast<const B&>(array);
  for (int64_t i = 0; i < array.length(); ++i) {
    if (typed.IsValid(i)) {
      const auto view = typed.GetView(i);
      out[i].assign(view.data(), view.size());
    }
  }
}

// The exact powers of ten a double holds (10^22 is the last).
constexpr double kExactTens[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// A decimal as the nearest double: where its unscaled integer and 10^scale are exact doubles (|unscaled| < 2^53, scale
// <= 22: every TPC-H amount), one IEEE division, correctly rounded as Python's float(Decimal) is; else Arrow's ToDouble.
inline double DecimalToDouble(const arrow::Decimal128& d, int32_t scale) {
  const int64_t low = static_cast<int64_t>(d.low_bits());
  if (scale >= 0 && scale <= 22 && d.high_bits() == (low >> 63) && low > -(int64_t{1} << 53) && low < (int64_t{1} << 53)) {
    return static_cast<double>(low) / kExactTens[scale];
  }
  return d.ToDouble(scale);
}
inline double DecimalToDouble(const arrow::Decimal256& d, int32_t scale) { return d.ToDouble(scale); }

// Decimals as doubles (0 where null).
template <typename A, typename D>
void CopyDecimal(const arrow::Array& array, double* out) {
  const auto& typed = static_cast<const A&>(array);
  const int32_t scale = static_cast<const arrow::DecimalType&>(*array.type()).scale();
  for (int64_t i = 0; i < array.length(); ++i) {
    out[i] = typed.IsValid(i) ? DecimalToDouble(D(typed.GetValue(i)), scale) : 0.0;
  }
}

// The values of one chunk into out (rows from `offset`), as the TF type `dtype`.
absl::Status CopyChunk(const arrow::Array& array, Tensor* out, int64_t offset) {
  using arrow::Type;
  const Type::type id = array.type_id();
  const tensorflow::DataType dtype = out->dtype();
  auto wrong = [&]() {
    return absl::InvalidArgumentError(absl::StrCat("holds ", array.type()->ToString(), ", which is not read as ",
                                                   tensorflow::DataTypeString(dtype)));
  };
#define TMR_FIXED(ARROW_ID, ARROW_ARRAY, TF_TYPE, CPP)                                                   \
  case Type::ARROW_ID:                                                                                   \
    if (dtype != tensorflow::TF_TYPE) return wrong();                                                    \
    CopyFixed<arrow::ARROW_ARRAY, CPP>(array, out->flat<CPP>().data() + offset);                        \
    return absl::OkStatus();
  switch (id) {
    TMR_FIXED(INT8, Int8Array, DT_INT8, int8_t)
    TMR_FIXED(INT16, Int16Array, DT_INT16, int16_t)
    TMR_FIXED(INT32, Int32Array, DT_INT32, int32_t)
    TMR_FIXED(INT64, Int64Array, DT_INT64, int64_t)
    TMR_FIXED(UINT8, UInt8Array, DT_UINT8, uint8_t)
    TMR_FIXED(UINT16, UInt16Array, DT_UINT16, uint16_t)
    TMR_FIXED(UINT32, UInt32Array, DT_UINT32, uint32_t)
    TMR_FIXED(UINT64, UInt64Array, DT_UINT64, uint64_t)
    TMR_FIXED(HALF_FLOAT, HalfFloatArray, DT_HALF, Eigen::half)
    TMR_FIXED(FLOAT, FloatArray, DT_FLOAT, float)
    TMR_FIXED(DOUBLE, DoubleArray, DT_DOUBLE, double)
    TMR_FIXED(DATE32, Date32Array, DT_INT32, int32_t)
    TMR_FIXED(TIMESTAMP, TimestampArray, DT_INT64, int64_t)
#undef TMR_FIXED
    case Type::BOOL: {
      if (dtype != tensorflow::DT_BOOL) return wrong();
      const auto& typed = static_cast<const arrow::BooleanArray&>(array);
      bool* values = out->flat<bool>().data() + offset;
      for (int64_t i = 0; i < array.length(); ++i) values[i] = typed.IsValid(i) && typed.Value(i);
      return absl::OkStatus();
    }
    case Type::STRING:
    case Type::BINARY:
      if (dtype != tensorflow::DT_STRING) return wrong();
      CopyBinary<arrow::BinaryArray>(array, out->flat<tstring>().data() + offset);
      return absl::OkStatus();
    case Type::STRING_VIEW:
    case Type::BINARY_VIEW:
      if (dtype != tensorflow::DT_STRING) return wrong();
      CopyBinary<arrow::BinaryViewArray>(array, out->flat<tstring>().data() + offset);
      return absl::OkStatus();
    case Type::DECIMAL128:
      if (dtype != tensorflow::DT_DOUBLE) return wrong();
      CopyDecimal<arrow::Decimal128Array, arrow::Decimal128>(array, out->flat<double>().data() + offset);
      return absl::OkStatus();
    case Type::DECIMAL256:
      if (dtype != tensorflow::DT_DOUBLE) return wrong();
      CopyDecimal<arrow::Decimal256Array, arrow::Decimal256>(array, out->flat<double>().data() + offset);
      return absl::OkStatus();
    case Type::LARGE_STRING:
    case Type::LARGE_BINARY:
      if (dtype != tensorflow::DT_STRING) return wrong();
      CopyBinary<arrow::LargeBinaryArray>(array, out->flat<tstring>().data() + offset);
      return absl::OkStatus();
    case Type::DICTIONARY: {
      // Each row's string is its index's entry of the dictionary, copied once a row (no re-encoding).
      if (dtype != tensorflow::DT_STRING) return wrong();
      const auto& typed = static_cast<const arrow::DictionaryArray&>(array);
      const auto& words = *typed.dictionary();
      if (words.type_id() != Type::STRING && words.type_id() != Type::BINARY) return wrong();
      const auto& entries = static_cast<const arrow::BinaryArray&>(words);
      tstring* values = out->flat<tstring>().data() + offset;
      for (int64_t i = 0; i < array.length(); ++i) {
        if (typed.IsValid(i)) {
          const auto view = entries.GetView(typed.GetValueIndex(i));
          values[i].assign(view.data(), view.size());
        }
      }
      return absl::OkStatus();
    }
    default:
      return wrong();
  }
}

class ReadParquetOp : public OpKernel {
 public:
  explicit ReadParquetOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("columns", &columns_));
  }

  void Compute(OpKernelContext* context) override {
    const std::string path(context->input(0).scalar<tstring>()());
    const auto groups_in = context->input(1).flat<int64_t>();
    const std::vector<int> groups(groups_in.data(), groups_in.data() + groups_in.size());
    const int n = static_cast<int>(columns_.size());
    std::shared_ptr<arrow::Table> table;
    if (!groups.empty()) {
      auto file = arrow::io::ReadableFile::Open(path);
      OP_REQUIRES_OK(context, FromArrow(file.status(), path));
      parquet::ArrowReaderProperties properties;
      properties.set_use_threads(true);
      parquet::arrow::FileReaderBuilder builder;
      OP_REQUIRES_OK(context, FromArrow(builder.Open(*file), path));
      builder.properties(properties);
      auto reader = builder.Build();
      OP_REQUIRES_OK(context, FromArrow(reader.status(), path));
      auto read = (*reader)->ReadRowGroups(groups, columns_);
      OP_REQUIRES_OK(context, FromArrow(read.status(), path));
      table = *read;
      OP_REQUIRES(context, table->num_columns() == n,
                  absl::InvalidArgumentError(absl::StrCat("reading the Parquet file ", path, ": ", n,
                                                          " columns asked, ", table->num_columns(), " read")));
    }
    const int64_t rows = table ? table->num_rows() : 0;
    for (int c = 0; c < n; ++c) {
      Tensor* values = nullptr;
      Tensor* valid = nullptr;
      OP_REQUIRES_OK(context, context->allocate_output(c, TensorShape({rows}), &values));
      OP_REQUIRES_OK(context, context->allocate_output(n + c, TensorShape({rows}), &valid));
      bool* flags = valid->flat<bool>().data();
      if (!table) continue;
      int64_t offset = 0;
      for (const auto& chunk : table->column(c)->chunks()) {
        const absl::Status copied = CopyChunk(*chunk, values, offset);
        OP_REQUIRES(context, copied.ok(),
                    absl::InvalidArgumentError(absl::StrCat("the Parquet file ", path, "'s column ",
                                                            table->field(c)->name(), " ", copied.message())));
        for (int64_t i = 0; i < chunk->length(); ++i) flags[offset + i] = chunk->IsValid(i);
        offset += chunk->length();
      }
    }
  }

 private:
  std::vector<int> columns_;
};

REGISTER_KERNEL_BUILDER(Name("TmrReadParquet").Device(::tensorflow::DEVICE_CPU), ReadParquetOp);

// The Arrow type of a logical type's name (as the table's schema names it); null where there is none.
std::shared_ptr<arrow::DataType> ArrowType(const std::string& kind) {
  static const std::vector<std::pair<std::string, std::shared_ptr<arrow::DataType>>> kTypes = {
      {"bool", arrow::boolean()},   {"int8", arrow::int8()},       {"int16", arrow::int16()},
      {"int32", arrow::int32()},    {"int64", arrow::int64()},     {"uint8", arrow::uint8()},
      {"uint16", arrow::uint16()},  {"uint32", arrow::uint32()},   {"uint64", arrow::uint64()},
      {"float16", arrow::float16()}, {"float32", arrow::float32()}, {"float64", arrow::float64()},
      {"string", arrow::utf8()},    {"date", arrow::date32()},
      {"timestamp[s]", arrow::timestamp(arrow::TimeUnit::SECOND)},
      {"timestamp[ms]", arrow::timestamp(arrow::TimeUnit::MILLI)},
      {"timestamp[us]", arrow::timestamp(arrow::TimeUnit::MICRO)},
      {"timestamp[ns]", arrow::timestamp(arrow::TimeUnit::NANO)}};
  for (const auto& [name, type] : kTypes) {
    if (name == kind) return type;
  }
  return nullptr;
}

// One column as an Arrow array: fixed-width values copied with their validity bytes, strings appended one by one.
arrow::Result<std::shared_ptr<arrow::Array>> ToArrow(const std::shared_ptr<arrow::DataType>& type, const Tensor& values,
                                                     const Tensor& valid, bool nullable) {
  const int64_t rows = values.NumElements();
  const uint8_t* flags = nullable ? reinterpret_cast<const uint8_t*>(valid.flat<bool>().data()) : nullptr;
  std::unique_ptr<arrow::ArrayBuilder> builder;
  ARROW_RETURN_NOT_OK(arrow::MakeBuilder(arrow::default_memory_pool(), type, &builder));
  ARROW_RETURN_NOT_OK(builder->Reserve(rows));
  if (type->id() == arrow::Type::STRING) {
    auto* strings = static_cast<arrow::StringBuilder*>(builder.get());
    const tstring* text = values.flat<tstring>().data();
    for (int64_t i = 0; i < rows; ++i) {
      if (flags && !flags[i]) {
        ARROW_RETURN_NOT_OK(strings->AppendNull());
      } else {
        ARROW_RETURN_NOT_OK(strings->Append(text[i].data(), static_cast<int32_t>(text[i].size())));
      }
    }
  } else if (type->id() == arrow::Type::BOOL) {
    auto* bools = static_cast<arrow::BooleanBuilder*>(builder.get());
    ARROW_RETURN_NOT_OK(bools->AppendValues(reinterpret_cast<const uint8_t*>(values.flat<bool>().data()), rows, flags));
  } else {
#define TMR_APPEND(ARROW_ID, BUILDER, CPP)                                                                       \
  case arrow::Type::ARROW_ID:                                                                                   \
    ARROW_RETURN_NOT_OK(static_cast<arrow::BUILDER*>(builder.get())                                             \
                            ->AppendValues(reinterpret_cast<const CPP*>(values.tensor_data().data()), rows, flags)); \
    break;
    switch (type->id()) {
      TMR_APPEND(INT8, Int8Builder, int8_t)
      TMR_APPEND(INT16, Int16Builder, int16_t)
      TMR_APPEND(INT32, Int32Builder, int32_t)
      TMR_APPEND(INT64, Int64Builder, int64_t)
      TMR_APPEND(UINT8, UInt8Builder, uint8_t)
      TMR_APPEND(UINT16, UInt16Builder, uint16_t)
      TMR_APPEND(UINT32, UInt32Builder, uint32_t)
      TMR_APPEND(UINT64, UInt64Builder, uint64_t)
      TMR_APPEND(HALF_FLOAT, HalfFloatBuilder, uint16_t)
      TMR_APPEND(FLOAT, FloatBuilder, float)
      TMR_APPEND(DOUBLE, DoubleBuilder, double)
      TMR_APPEND(DATE32, Date32Builder, int32_t)
      TMR_APPEND(TIMESTAMP, TimestampBuilder, int64_t)
      default:
        return arrow::Status::TypeError("no writer for ", type->ToString());
    }
#undef TMR_APPEND
  }
  return builder->Finish();
}

class EncodeParquetOp : public OpKernel {
 public:
  explicit EncodeParquetOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("names", &names_));
    OP_REQUIRES_OK(context, context->GetAttr("kinds", &kinds_));
    OP_REQUIRES_OK(context, context->GetAttr("nullable", &nullable_));
    OP_REQUIRES_OK(context, context->GetAttr("row_group_rows", &row_group_rows_));
    OP_REQUIRES(context, names_.size() == kinds_.size() && names_.size() == nullable_.size(),
                absl::InvalidArgumentError("names, kinds and nullable must name each column once"));
    for (const auto& kind : kinds_) {
      OP_REQUIRES(context, ArrowType(kind) != nullptr, absl::InvalidArgumentError(absl::StrCat("no Parquet type for ", kind)));
    }
  }

  void Compute(OpKernelContext* context) override {
    const int n = static_cast<int>(names_.size());
    std::vector<std::shared_ptr<arrow::Field>> fields;
    std::vector<std::shared_ptr<arrow::Array>> arrays;
    for (int c = 0; c < n; ++c) {
      const auto type = ArrowType(kinds_[c]);
      const Tensor& values = context->input(c);
      const Tensor& valid = context->input(n + c);
      OP_REQUIRES(context, values.NumElements() == context->input(0).NumElements() && valid.NumElements() == values.NumElements(),
                  absl::InvalidArgumentError(absl::StrCat("column ", names_[c], " has another number of rows")));
      auto array = ToArrow(type, values, valid, nullable_[c]);
      OP_REQUIRES(context, array.ok(), absl::InvalidArgumentError(absl::StrCat("column ", names_[c], ": ", array.status().ToString())));
      fields.push_back(arrow::field(names_[c], type, nullable_[c]));
      arrays.push_back(*array);
    }
    const auto table = arrow::Table::Make(arrow::schema(fields), arrays);
    auto sink = arrow::io::BufferOutputStream::Create();
    OP_REQUIRES_OK(context, FromArrow(sink.status(), "being written"));
    const auto properties = parquet::WriterProperties::Builder().compression(parquet::Compression::SNAPPY)->build();
    const auto arrow_properties = parquet::ArrowWriterProperties::Builder().store_schema()->build();
    OP_REQUIRES_OK(context, FromArrow(parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), *sink,
                                                                 row_group_rows_, properties, arrow_properties),
                                      "being written"));
    auto buffer = (*sink)->Finish();
    OP_REQUIRES_OK(context, FromArrow(buffer.status(), "being written"));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({}), &out));
    out->scalar<tstring>()().assign(reinterpret_cast<const char*>((*buffer)->data()), (*buffer)->size());
  }

 private:
  std::vector<std::string> names_;
  std::vector<std::string> kinds_;
  std::vector<bool> nullable_;
  int64_t row_group_rows_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("TmrEncodeParquet").Device(::tensorflow::DEVICE_CPU), EncodeParquetOp);

}  // namespace

}  // namespace tfmapreduce
