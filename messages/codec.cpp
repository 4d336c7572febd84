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

  // Large tensors are referenced, not copied, while the message is built: their bytes are copied
  // once, when the message is flattened into its frame.
  void put_tensors(capnp::List<wire::Tensor>::Builder out, const std::vector<tensor>& in) {
    for (unsigned i = 0; i < in.size(); ++i) {
      auto t = out[i];
      auto& x = in[i];
      t.setName(x.name);
      t.setDtype(static_cast<wire::DType>(x.type));
      auto shape = t.initShape(static_cast<unsigned>(x.shape.size()));
      for (unsigned k = 0; k < x.shape.size(); ++k) shape.set(k, x.shape[k]);
      auto* p = reinterpret_cast<const kj::byte*>(x.data.data());
      copy_tally::add(x.data.size());  // referenced or not, flattening the message copies it
      bool by_reference = x.data.size() >= 4096 && x.data.size() % sizeof(capnp::word) == 0 &&
                          reinterpret_cast<uintptr_t>(p) % alignof(capnp::word) == 0;
      if (by_reference) {
        t.adoptData(orphans.referenceExternalData(capnp::Data::Reader(p, x.data.size())));
      } else {
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

bytes encode_frame(const envelope& e) {
  capnp::MallocMessageBuilder builder;
  auto root = builder.initRoot<wire::Envelope>();
  root.setFrom(e.from);
  codec_context c{builder.getOrphanage(), nullptr, 0};
  put_body(root.initBody(), e.content, c);
  auto flat = std::make_shared<kj::Array<capnp::word>>(capnp::messageToFlatArray(builder));
  auto b = flat->asBytes();
  return bytes(reinterpret_cast<const char*>(b.begin()), b.size(), std::move(flat));
}

std::string encode(const envelope& e) {
  return encode_frame(e).str();
}

decoded decode(std::string_view frame, const decode_limits& limits) {
  return decode_frame(bytes::copy_of(frame), limits);
}

decoded decode_frame(const bytes& frame_in, const decode_limits& limits) {
  decoded res;
  if (frame_in.size() > limits.max_frame_bytes()) {
    res.error.kind = "too_large";
    res.error.reason = "message of " + std::to_string(frame_in.size()) + " bytes exceeds the limit of " +
                       std::to_string(limits.max_frame_bytes()) + " bytes (runtime.max_payload_bytes)";
    return res;
  }
  if (frame_in.empty() || frame_in.size() % sizeof(capnp::word) != 0) {
    res.error.kind = "malformed";
    res.error.reason =
        "malformed message: " + std::to_string(frame_in.size()) + " bytes is not a whole number of Cap'n Proto words";
    return res;
  }
  // FlatArrayMessageReader needs word alignment; copy only when the frame lacks it.
  auto frame = frame_in;
  if (reinterpret_cast<uintptr_t>(frame.data()) % alignof(capnp::word) != 0) {
    char* buf = nullptr;
    auto aligned = bytes::allocate(frame.size(), buf);
    std::memcpy(buf, frame.data(), frame.size());
    copy_tally::add(frame.size());
    frame = std::move(aligned);
  }
  auto words = kj::arrayPtr(reinterpret_cast<const capnp::word*>(frame.data()), frame.size() / sizeof(capnp::word));
  capnp::ReaderOptions opts;
  opts.traversalLimitInWords = 2 * words.size() + 1024;
  opts.nestingLimit = 16;
  codec_context c{capnp::Orphanage(), frame.owner(), 0};
  try {
    capnp::FlatArrayMessageReader reader(words, opts);
    res.value = read_envelope(reader.getRoot<wire::Envelope>(), c, res.error);
  } catch (const kj::Exception& e) {
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

}  // namespace sloserve::msg
