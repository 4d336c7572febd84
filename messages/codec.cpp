#include "messages/codec.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/io.h>

#include <cstring>
#include <memory>
#include <stdexcept>

#include "messages/sloserve.capnp.h"
#include "pipelines/copy_tally.hpp"

namespace sloserve::msg {

std::string_view status_name(status s) {
  switch (s) {
    case status::ok:
      return "OK";
    case status::dropped:
      return "DROPPED";
    case status::error:
      return "ERROR";
    case status::overloaded:
      return "OVERLOADED";
  }
  return "?";
}

namespace {

std::string text(capnp::Text::Reader t) {
  return std::string(t.cStr(), t.size());
}

// An enum value read from the wire; out of range is an invalid message.
template <class E>
E enum_of(unsigned v, unsigned count, const char* what) {
  if (v >= count) throw std::runtime_error(std::string("unknown ") + what + " " + std::to_string(v));
  return static_cast<E>(v);
}

// What the generated conversions need beyond the fields: tensors, whose bytes are referenced
// rather than copied in both directions, and the payload count the decoder limits.
struct codec_context {
  capnp::Orphanage orphans;           // encoding
  std::shared_ptr<const void> owner;  // decoding: keeps the frame's bytes alive
  uint64_t payload = 0;               // decoding: tensor bytes read so far
  std::vector<bytes> referenced;      // encoding: the tensors the message references

  // Large tensors are referenced, not copied, while the message is built: their bytes are copied
  // once if the message is flattened into one frame (encode_frame), never if it goes as parts.
  void put_tensors(capnp::List<wire::Tensor>::Builder out, const std::vector<tensor>& in) {
    for (unsigned i = 0; i < in.size(); ++i) {
      auto t = out[i];
      auto& x = in[i];
      t.setName(x.name);
      t.setDtype(static_cast<wire::DType>(x.type));
      auto shape = t.initShape(static_cast<unsigned>(x.shape.size()));
      for (unsigned k = 0; k < x.shape.size(); ++k) shape.set(k, x.shape[k]);
      auto* p = reinterpret_cast<const kj::byte*>(x.data.data());
      bool by_reference = x.data.size() >= 4096 && x.data.size() % sizeof(capnp::word) == 0 &&
                          reinterpret_cast<uintptr_t>(p) % alignof(capnp::word) == 0;
      if (by_reference) {
        t.adoptData(orphans.referenceExternalData(capnp::Data::Reader(p, x.data.size())));
        referenced.push_back(x.data);
      } else {
        copy_tally::add(x.data.size());
        auto data = t.initData(static_cast<unsigned>(x.data.size()));
        if (!x.data.empty()) std::memcpy(data.begin(), p, x.data.size());
      }
    }
  }

  // Tensors share the frame's bytes and keep `owner` (the frame's) alive.
  std::vector<tensor> get_tensors(capnp::List<wire::Tensor>::Reader in) {
    std::vector<tensor> out;
    out.reserve(in.size());
    for (auto t : in) {
      tensor x;
      x.name = text(t.getName());
      auto dt = static_cast<unsigned>(t.getDtype());
      if (dt > static_cast<unsigned>(last_dtype))
        throw std::runtime_error("tensor '" + x.name + "' has an unknown dtype " + std::to_string(dt));
      x.type = static_cast<dtype>(dt);
      for (auto d : t.getShape()) x.shape.push_back(d);
      auto data = t.getData();
      x.data = bytes(reinterpret_cast<const char*>(data.begin()), data.size(), owner);
      payload += data.size();
      if (auto ok = check_tensor_bytes(x); !ok) throw std::runtime_error(ok.error());
      out.push_back(std::move(x));
    }
    return out;
  }
};

#include "messages/sloserve_codec.inc"

envelope read_envelope(wire::Envelope::Reader r, codec_context& c, decode_error& partial) {
  envelope e;
  e.from = text(r.getFrom());
  partial.from = e.from;
  auto b = r.getBody();
  // The ids come first: a request or invocation refused later (a bad tensor) can still be answered.
  if (b.which() == wire::Envelope::Body::CLIENT_REQUEST) partial.request_id = b.getClientRequest().getRequestId();
  if (b.which() == wire::Envelope::Body::INVOCATION) partial.invocation_id = b.getInvocation().getId();
  if (b.which() == wire::Envelope::Body::INVOCATION_RESULT) partial.invocation_id = b.getInvocationResult().getId();
  e.content = get_body(b, c);
  return e;
}

}  // namespace

namespace {

// A message built around `e`'s tensors, kept alive by the frames or parts made of it.
struct built {
  capnp::MallocMessageBuilder builder;
  std::vector<bytes> referenced;  // the tensors its external segments are
};

std::shared_ptr<built> build(const envelope& e) {
  auto b = std::make_shared<built>();
  auto root = b->builder.initRoot<wire::Envelope>();
  root.setFrom(e.from);
  codec_context c{b->builder.getOrphanage(), nullptr, 0, {}};
  put_body(root.initBody(), e.content, c);
  b->referenced = std::move(c.referenced);
  return b;
}

bytes flatten(built& b) {
  for (auto& t : b.referenced) copy_tally::add(t.size());
  auto flat = std::make_shared<kj::Array<capnp::word>>(capnp::messageToFlatArray(b.builder));
  auto bs = flat->asBytes();
  return bytes(reinterpret_cast<const char*>(bs.begin()), bs.size(), std::move(flat));
}

}  // namespace

bytes encode_frame(const envelope& e) {
  return flatten(*build(e));
}

std::vector<bytes> encode_parts(const envelope& e) {
  auto b = build(e);
  if (b->referenced.empty()) return {flatten(*b)};
  auto& builder = b->builder;
  auto segments = builder.getSegmentsForOutput();
  std::vector<bytes> parts;
  parts.reserve(segments.size());
  for (auto seg : segments) {
    auto bs = seg.asBytes();
    parts.emplace_back(reinterpret_cast<const char*>(bs.begin()), bs.size(), b);
  }
  return parts;
}

std::string encode(const envelope& e) {
  return encode_frame(e).str();
}

decoded decode(std::string_view frame, const decode_limits& limits) {
  return decode_frame(bytes::copy_of(frame), limits);
}

namespace {

decoded too_large(uint64_t size, const decode_limits& limits) {
  decoded res;
  res.error.kind = "too_large";
  res.error.reason = "message of " + std::to_string(size) + " bytes exceeds the limit of " +
                     std::to_string(limits.max_frame_bytes()) + " bytes (runtime.max_payload_bytes)";
  return res;
}

decoded malformed(std::string reason) {
  decoded res;
  res.error.kind = "malformed";
  res.error.reason = "malformed message: " + std::move(reason);
  return res;
}

// FlatArrayMessageReader and SegmentArrayMessageReader need word alignment: `b` itself when it
// has it, else a copy that does.
bytes aligned(const bytes& b) {
  if (reinterpret_cast<uintptr_t>(b.data()) % alignof(capnp::word) == 0) return b;
  char* buf = nullptr;
  auto copy = bytes::allocate(b.size(), buf);
  std::memcpy(buf, b.data(), b.size());
  copy_tally::add(b.size());
  return copy;
}

kj::ArrayPtr<const capnp::word> words_of(const bytes& b) {
  return kj::arrayPtr(reinterpret_cast<const capnp::word*>(b.data()), b.size() / sizeof(capnp::word));
}

// The envelope in the message that `make_reader` opens (it may throw on a malformed one), whose
// tensors keep `owner` alive; `words` is its size, which bounds the traversal.
template <class MakeReader>
decoded read_message(MakeReader make_reader, size_t words, std::shared_ptr<const void> owner,
                     const decode_limits& limits) {
  decoded res;
  capnp::ReaderOptions opts;
  opts.traversalLimitInWords = 2 * words + 1024;
  opts.nestingLimit = 16;
  codec_context c{capnp::Orphanage(), std::move(owner), 0, {}};
  try {
    auto reader = make_reader(opts);
    res.value = read_envelope(reader->template getRoot<wire::Envelope>(), c, res.error);
  } catch (const kj::Exception& e) {  // the ids read before it stay, to answer with
    res.value.reset();
    res.error.kind = "malformed";
    res.error.reason = "malformed message: " + std::string(e.getDescription().cStr());
    return res;
  } catch (const std::exception& e) {
    res.error.kind = "invalid";
    res.error.reason = std::string("invalid message: ") + e.what();
    res.value.reset();
    return res;
  }
  if (c.payload > limits.max_payload_bytes) {
    res.value.reset();
    res.error.kind = "payload_too_large";
    res.error.reason = "payload of " + std::to_string(c.payload) + " bytes exceeds the limit of " +
                       std::to_string(limits.max_payload_bytes) + " bytes (runtime.max_payload_bytes)";
  }
  return res;
}

}  // namespace

decoded decode_frame(const bytes& frame_in, const decode_limits& limits) {
  if (frame_in.size() > limits.max_frame_bytes()) return too_large(frame_in.size(), limits);
  if (frame_in.empty() || frame_in.size() % sizeof(capnp::word) != 0)
    return malformed(std::to_string(frame_in.size()) + " bytes is not a whole number of Cap'n Proto words");
  auto frame = aligned(frame_in);
  auto words = words_of(frame);
  return read_message(
      [&](const capnp::ReaderOptions& opts) { return std::make_unique<capnp::FlatArrayMessageReader>(words, opts); },
      words.size(), frame.owner(), limits);
}

decoded decode_parts(const std::vector<bytes>& parts_in, const decode_limits& limits) {
  if (parts_in.size() == 1) return decode_frame(parts_in[0], limits);
  if (parts_in.empty() || parts_in.size() > max_parts)
    return malformed(std::to_string(parts_in.size()) + " parts (a message has 1 to " + std::to_string(max_parts) + ")");
  uint64_t size = 0;
  for (auto& p : parts_in) {
    size += p.size();
    if (p.empty() || p.size() % sizeof(capnp::word) != 0)
      return malformed("a part of " + std::to_string(p.size()) + " bytes is not a whole number of Cap'n Proto words");
  }
  if (size > limits.max_frame_bytes()) return too_large(size, limits);
  auto parts = std::make_shared<std::vector<bytes>>();
  parts->reserve(parts_in.size());
  std::vector<kj::ArrayPtr<const capnp::word>> segments;
  for (auto& p : parts_in) segments.push_back(words_of(parts->emplace_back(aligned(p))));
  return read_message(
      [&](const capnp::ReaderOptions& opts) {
        return std::make_unique<capnp::SegmentArrayMessageReader>(kj::arrayPtr(segments.data(), segments.size()), opts);
      },
      size / sizeof(capnp::word), parts, limits);
}

}  // namespace sloserve::msg
