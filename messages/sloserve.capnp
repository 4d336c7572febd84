@0xc4f1a3b2d5e6f708;
# Wire format of sloserve: every ZeroMQ frame between processes is one Envelope.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("sloserve::wire");

enum DType { float32 @0; float16 @1; int64 @2; int32 @3; uint8 @4; }
enum Status { ok @0; dropped @1; error @2; overloaded @3; }

struct Tensor {
  name @0 :Text;
  dtype @1 :DType;
  shape @2 :List(Int64);
  data @3 :Data;
}

struct ClientRequest {
  pipeline @0 :Text;
  requestId @1 :UInt64;
  inputs @2 :List(Tensor);
  networkMs @3 :Float64 = -1;
  sentAtUs @4 :Int64;  # the client's wall clock when it meant to send (us since the Unix epoch); 0: unknown
}

struct StageTiming {
  stage @0 :Text;
  node @1 :Text;
  device @2 :UInt32;
  batch @3 :UInt32;
  queueMs @4 :Float64;
  execMs @5 :Float64;
}

struct ClientReply {
  requestId @0 :UInt64;
  status @1 :Status;
  reason @2 :Text;
  outputs @3 :List(Tensor);
  timings @4 :List(StageTiming);
  totalMs @5 :Float64;
}

struct Invocation {
  id @0 :UInt64;
  frontend @1 :Text;
  model @2 :Text;
  device @3 :UInt32;
  budgetNs @4 :Int64;
  inputs @5 :List(Tensor);
}

struct InvocationResult {
  id @0 :UInt64;
  status @1 :Status;
  reason @2 :Text;
  outputs @3 :List(Tensor);
  node @4 :Text;
  device @5 :UInt32;
  batch @6 :UInt32;
  queueNs @7 :Int64;
  execNs @8 :Int64;
}

# l(b) a worker measured at start-up for a model whose entry has no profile.
struct MeasuredProfile {
  model @0 :Text;
  batch @1 :List(UInt32);
  latencyMs @2 :List(Float64);
  step @3 :Bool;  # the device pads batches to the listed sizes
}

struct RegisterNode {
  node @0 :Text;
  roles @1 :List(Text);
  devices @2 :UInt32;
  incarnation @3 :UInt64;
  scheduleEpoch @4 :UInt64;
  profiles @5 :List(MeasuredProfile);
  leaving @6 :Bool;  # a worker shutting down: take it out of routing, it finishes what it holds
}

struct Heartbeat {
  node @0 :Text;
  incarnation @1 :UInt64;
  seq @2 :UInt64;
  heard @3 :UInt64;  # seq of the last heartbeat the sender got from the receiver; 0: none
}

struct SessionLoad {
  model @0 :Text;
  device @1 :UInt32;
  arrived @2 :UInt64;
  completed @3 :UInt64;
  dropped @4 :UInt64;
  queueLength @5 :UInt32;
  meanLatencyMs @6 :Float64;
  meanBudgetMs @7 :Float64;  # mean time left to the deadline when requests arrived
}

struct PipelineLoad {
  pipeline @0 :Text;
  queries @1 :UInt64;
  stageInvocations @2 :List(UInt64);
}

struct LoadReport {
  node @0 :Text;
  windowS @1 :Float64;
  sessions @2 :List(SessionLoad);
  pipelines @3 :List(PipelineLoad);
}

struct RouteInstance {
  node @0 :Text;
  device @1 :UInt32;
  weight @2 :Float64;
}

struct ModelRoute {
  model @0 :Text;
  instances @1 :List(RouteInstance);
}

struct StageBudget {
  pipeline @0 :Text;
  stage @1 :Text;
  budgetMs @2 :Float64;
}

struct RoutingTable {
  epoch @0 :UInt64;
  routes @1 :List(ModelRoute);
  budgets @2 :List(StageBudget);
}

struct SessionSchedule {
  model @0 :Text;
  batch @1 :UInt32;
}

struct DeviceSchedule {
  device @0 :UInt32;
  dutyCycleMs @1 :Float64;
  sessions @2 :List(SessionSchedule);
}

struct Schedule {
  epoch @0 :UInt64;
  devices @1 :List(DeviceSchedule);
}

# Controller (or scaler) -> worker: vertical scaling in place.
struct Resize {
  device @0 :UInt32;
  threads @1 :UInt32;  # intra-op threads (cores) of the device
}

struct StatusRequest { token @0 :UInt64; }
struct StatusReply { token @0 :UInt64; ready @1 :Bool; detail @2 :Text; }

struct Envelope {
  from @0 :Text;
  body :union {
    clientRequest @1 :ClientRequest;
    clientReply @2 :ClientReply;
    invocation @3 :Invocation;
    invocationResult @4 :InvocationResult;
    registerNode @5 :RegisterNode;
    heartbeat @6 :Heartbeat;
    loadReport @7 :LoadReport;
    routingTable @8 :RoutingTable;
    schedule @9 :Schedule;
    statusRequest @10 :StatusRequest;
    statusReply @11 :StatusReply;
    resize @12 :Resize;
  }
}
