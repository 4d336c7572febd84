@0xc4f1a3b2d5e6f708;
# Every message sloserve exchanges, defined once. Across processes each ZeroMQ frame is one
# Envelope; within a process actors exchange the plain C++ structs tools/gen_messages.py writes
# from this file (snake_case fields in ordinal order, these defaults and comments). Lines `#! ...`
# inside a struct add to the C++ struct only: `#! eq` (a defaulted operator==) or a member that
# never travels.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("sloserve::wire");

enum DType {
  float32 @0; float16 @1; int64 @2; int32 @3; uint8 @4; float64 @5; uint64 @6; int8 @7; int16 @8; uint16 @9;
  uint32 @10; boolean @11; bytes @12;
}
enum Status { ok @0; dropped @1; error @2; overloaded @3; }

struct Tensor {
  name @0 :Text;
  dtype @1 :DType;
  shape @2 :List(Int64);
  data @3 :Data;
}

# A tensor whose bytes lie in a registered shared-memory region: `byteSize` bytes at `offset` into
# region `region` (SharedMemoryRequest).
struct SharedMemoryTensor {
  name @0 :Text;
  type @1 :DType;
  shape @2 :List(Int64);
  region @3 :Text;
  offset @4 :UInt64;
  byteSize @5 :UInt64;
}

# Client -> frontend.
struct ClientRequest {
  pipeline @0 :Text;
  requestId @1 :UInt64;
  inputs @2 :List(Tensor);
  networkMs @3 :Float64 = -1;  # the client's measured network time; < 0 when unknown
  sentAtUs @4 :Int64;  # the client's wall clock when it meant to send (µs since the Unix epoch); 0: unknown
  # A client of its own (Jellyfish): its id, and what it declares of itself. Requests of one id
  # share an uplink estimate, an SLO and the variant the scheduler maps them to.
  client @5 :Text;  # empty: the connection stands for the client
  sloMs @6 :Float64;  # 0: the pipeline's SLO
  rateHz @7 :Float64;  # frames/s it sends; 0: measured at the frontend
  rttMs @8 :Float64 = -1;  # its smoothed round trip to the frontend; < 0: unknown
  queuedMs @9 :Float64;  # how long it waited on the client, after sentAtUs, before its bytes went out
  # A partitioned model (Graft): the client ran layers [0, startLayer) and sends what they made;
  # the server runs the rest within sloMs (the time left). 0: the whole model.
  startLayer @10 :UInt32;
  # Frames the client captured and did not send since its previous request, as they could not
  # have been answered within its SLO: missed, though the server never saw them.
  skipped @11 :UInt32;
  # The version to run: stages of versioned models run that version of theirs (KServe's
  # /v2/models/{m}/versions/{v}); 0: each stage's versions by their weights.
  version @12 :UInt32;
  # The tenant it comes from (security.tenants). The node sets it from the client's CurveZMQ key
  # or bearer token under security; without keys, the client names it. Empty: no tenant.
  tenant @13 :Text;
  # Inputs a client on the node's host left in its shared-memory regions (runtime.client_shared_memory)
  # instead of sending their bytes; the node reads them in place and adds them to `inputs`.
  shmInputs @14 :List(SharedMemoryTensor);
  #! int64_t received_ns = 0;  // when the node handed it to its frontend, counted by its intake gate; 0: not counted
}

struct StageTiming {
  stage @0 :Text;
  node @1 :Text;
  device @2 :UInt32;
  batch @3 :UInt32;
  queueMs @4 :Float64;
  execMs @5 :Float64;
  model @6 :Text;  # the model (variant) that ran the stage
  version @7 :UInt32;  # its version (models[].version)
}

# Frontend -> client: exactly one per request.
struct ClientReply {
  requestId @0 :UInt64;
  code @1 :Status;
  reason @2 :Text;
  outputs @3 :List(Tensor);
  timings @4 :List(StageTiming);
  totalMs @5 :Float64;
  # Data adaptation: the image size (pixels) the variant this client is mapped to takes; the
  # client sends that size next, or the largest its uplink carries. 0: no advice.
  inputHeight @6 :UInt32;
  inputWidth @7 :UInt32;
  # Per-path SLOs: the leaf stages (`stages[].slo_ms`) that finished after their own SLO; the
  # reply is then late though it came within the pipeline's.
  latePaths @8 :List(Text);
}

# Frontend -> worker: run one stage on one device.
struct Invocation {
  id @0 :UInt64;
  frontend @1 :Text;  # node that awaits the result
  model @2 :Text;
  device @3 :UInt32;
  budgetNs @4 :Int64;  # time left until this stage's deadline when sent
  inputs @5 :List(Tensor);
  dummy @6 :Bool;  # Piccolo's padding: the device runs it in its batches and answers without outputs
  #! int64_t received_ns = 0;  // when the node took it in (its steady clock); the deadline runs from there
  #! bool checked = false;  // its inputs were checked on this node already (by the frontend, at ingress)
}

# Worker -> frontend.
struct InvocationResult {
  id @0 :UInt64;
  code @1 :Status;
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

# A model a worker's device could not load (a file that is not there, does not load, or does not
# fit the device): not routed there.
struct UnloadedModel {
  node @0 :Text;
  device @1 :UInt32;
  model @2 :Text;
  reason @3 :Text;
}


# Any node -> controller: "I exist", repeated every beacon.
struct RegisterNode {
  node @0 :Text;
  roles @1 :List(Text);
  devices @2 :UInt32;
  incarnation @3 :UInt64;  # changes when the node restarts
  scheduleEpoch @4 :UInt64;  # epoch of the schedule the worker runs; 0: none
  profiles @5 :List(MeasuredProfile);
  leaving @6 :Bool;  # a worker shutting down: take it out of routing, it finishes what it holds
  configRevision @7 :UInt64;  # the applied configuration it runs (ConfigUpdate); 0: the file it started with
  unloaded @8 :List(UnloadedModel);  # what its devices could not load of the schedule it runs
}

struct Heartbeat {
  node @0 :Text;
  incarnation @1 :UInt64;
  seq @2 :UInt64;
  heard @3 :UInt64;  # seq of the last heartbeat the sender got from the receiver; 0: none
  # Link probes (frontend -> worker): a heartbeat with `probe` set asks for an immediate answer,
  # a heartbeat with `echo` set to that id and nothing else that counts. `padding` is the probe's
  # load (one uint8 tensor), which times the link per byte.
  probe @4 :UInt64;
  echo @5 :UInt64;
  padding @6 :List(Tensor);
  #! int64_t received_ns = 0;  // when the node took it in (its steady clock)
}

struct SessionLoad {
  model @0 :Text;
  device @1 :UInt32;
  arrived @2 :UInt64;  # since the previous report
  completed @3 :UInt64;
  dropped @4 :UInt64;
  queueLength @5 :UInt32;
  meanLatencyMs @6 :Float64;
  meanBudgetMs @7 :Float64;  # time left to the deadline when requests arrived (network time shows here)
  queueBudgetsMs @8 :List(Float64);    # time left to the deadline of each queued request, EDF order (at most 256)
  arrivalBudgetsMs @9 :List(Float64);  # time left on arrival of the latest requests (at most 256)
  execMs @10 :Float64;          # time its batches took to run since the previous report
  expectedExecMs @11 :Float64;  # what the model's profile said they would take (same batches, same device)
  execBatches @12 :UInt32;      # how many batches those were
}

# Queries of a partitioned model's pipeline that start at one layer under one SLO (Graft's
# fragment <p, t, q>), and how many clients sent them.
struct FragmentLoad {
  startLayer @0 :UInt32;
  sloMs @1 :Float64;
  queries @2 :UInt64;
  clients @3 :UInt32;
}

# A frontend's view of one pipeline: queries admitted and invocations of each stage (for rates
# and measured fan-out), since the previous report.
struct PipelineLoad {
  pipeline @0 :Text;
  queries @1 :UInt64;
  stageInvocations @2 :List(UInt64);
  fallthroughs @3 :List(UInt64);  # per stage: invocations of a cascade's second model (its first unsure)
  fragments @4 :List(FragmentLoad);  # a partitioned model's queries by where they start and their SLO
  # Queries sent to it that the frontend shed for priority or a tenant's fair share (not counted
  # in `queries`): the plan sees the load offered, not only what it let in.
  shed @5 :UInt64;
}


# A frontend's view of the way to one worker: over its last window, the time its invocations
# spent outside the worker's queue and device (send to result, less queueing and execution); and
# what its link probes found.
struct LinkLoad {
  node @0 :Text;
  transferMs @1 :Float64;  # mean over the results
  results @2 :UInt64;
  # From the frontend's link probes: what each MB of a request adds on the way there, and the
  # round trip of an empty probe; < 0: not probed.
  msPerMb @3 :Float64 = -1;
  baseMs @4 :Float64 = -1;
  unheard @5 :Bool;  # the frontend does not hear the worker now (it marked it down)
}

struct ImageBytes {
  pixels @0 :Float64;
  bytes @1 :Float64;  # a recent mean
}

# A frontend's view of one client that names itself (ClientRequest.client), over the last second.
struct ClientLoad {
  client @0 :Text;
  pipeline @1 :Text;
  sloMs @2 :Float64;
  rateHz @3 :Float64;  # declared, else measured over the window
  uplinkMbps @4 :Float64 = -1;  # harmonic mean of its uploads over the last second; < 0: unknown
  rttMs @5 :Float64;
  bytesPerPixel @6 :Float64;  # of the images it sent (JPEG compresses); 0: unknown
  imagePixels @7 :Float64;  # the pixels of those images (bytesPerPixel was measured there)
  images @8 :List(ImageBytes);  # what its images weighed, per size it sent lately
  # The uplink that its uploads fell below only scheduler.jellyfish.uplink_quantile of the time
  # lately (uplink_estimate::low_mbps); < 0: unknown.
  uplinkLowMbps @9 :Float64 = -1;
  # The share of the wait behind a running batch that Jellyfish's lift onto spare compute plans
  # for (dip_quantile::wait_share): 1, the worst case, unless its pipeline's misses allow less.
  waitShare @10 :Float64 = 1;
  # The share of scheduler.jellyfish.headroom its pipeline's plan keeps on each worker
  # (dip_quantile::headroom_share): 1 unless its pipeline's misses allow less.
  headroomShare @11 :Float64 = 1;
}

# A tenant's requests at one frontend: every arrival, admitted or capped (queries/s, decayed over
# two seconds), so that frontends split its rate cap by where it sends.
struct TenantLoad {
  tenant @0 :Text;
  offered @1 :Float64;
}

struct LoadReport {
  node @0 :Text;
  windowS @1 :Float64;
  sessions @2 :List(SessionLoad);  # from workers
  pipelines @3 :List(PipelineLoad);  # from frontends
  links @4 :List(LinkLoad);  # from frontends
  clients @5 :List(ClientLoad);  # from frontends
  # From frontends, to the controller and to every other frontend: the capped tenants' rates here.
  tenants @6 :List(TenantLoad);
}

struct RouteInstance {
  node @0 :Text;
  device @1 :UInt32;
  weight @2 :Float64 = 1;
  dummyRate @3 :Float64;  # dummy requests/s the frontends send it between them (Piccolo's padding)
  spillAt @4 :UInt32;  # outstanding invocations at which it is busy (frontends spill past); 0: never
  spare @5 :Bool;  # kept from an earlier plan: takes work only when the planned instances are busy
  batch @6 :UInt32;  # whole batches: the frontends send it this many in turn (Piccolo's dispatch); 0: one at a time
  durationMs @7 :Float64;  # with batch: how long it runs one (the turn passes over it while it would not be free)
  #! eq
}

struct ModelRoute {
  model @0 :Text;
  instances @1 :List(RouteInstance);
  # Whole batches with several frontends (Piccolo's central dispatcher): the frontend that places
  # every invocation of the model in its one turn; the others forward theirs to it while they hear
  # it. Empty: each frontend sends its share of each batch in its own turn.
  dispatcher @2 :Text;
  #! eq
}

struct StageBudget {
  pipeline @0 :Text;
  stage @1 :Text;
  budgetMs @2 :Float64;
  model @3 :Text;  # the model (variant) the stage runs now; empty: the one the file names
  # A cascade stage that runs its cascade: the share of the budget its first model gets (the
  # rest is the second's); 0: by the models' l(1). A stage whose model is the cascade's second
  # runs that alone.
  firstShare @4 :Float64;
  #! eq
}

# Where one client's requests of a pipeline go (Jellyfish's mapping): the variant, the instance,
# the compute budget planned for them and the image size to tell the client.
struct ClientRoute {
  client @0 :Text;
  pipeline @1 :Text;
  model @2 :Text;
  node @3 :Text;
  device @4 :UInt32;
  budgetMs @5 :Float64;
  inputHeight @6 :UInt32;
  inputWidth @7 :UInt32;
  #! eq
}

# Graft: queries of `pipeline` that start at `startLayer` with an SLO of at least `sloMs` run the
# layer ranges `models` names in turn, each within its share of the time left (`budgetsMs`, in
# proportion). Routes of one start and SLO share its queries by `rate`.
struct FragmentRoute {
  pipeline @0 :Text;
  startLayer @1 :UInt32;
  sloMs @2 :Float64;
  models @3 :List(Text);
  budgetsMs @4 :List(Float64);
  rate @5 :Float64;
  #! eq
}

# A plan short of devices with pipelines of several priorities carries `rate` queries/s of
# `pipeline` (the cluster's, all frontends together): frontends answer what is above it OVERLOADED.
struct PipelineQuota {
  pipeline @0 :Text;
  rate @1 :Float64;
  offered @2 :Float64;  # the rate it was planned from
  priority @3 :Int32;
  #! eq
}

# Controller -> frontends.
struct RoutingTable {
  epoch @0 :UInt64;
  routes @1 :List(ModelRoute);
  budgets @2 :List(StageBudget);
  clients @3 :List(ClientRoute);
  frontends @4 :UInt32 = 1;  # frontends sharing the dummy rates: each sends its share
  fragments @5 :List(FragmentRoute);
  quotas @6 :List(PipelineQuota);  # empty: no pipeline is shed
  unloaded @7 :List(UnloadedModel);  # instances that could not load their model: why a model has none
}


struct SessionSchedule {
  model @0 :Text;
  batch @1 :UInt32 = 1;
  latencyScale @2 :Float64 = 1;  # the model runs at its profile x this (the controller's refresh)
  collect @3 :UInt32;  # wait for this many queued before a batch starts, unless the oldest can wait no longer; 0: run what is queued
  collectMs @4 :Float64;  # with collect: the time a batch takes to fill at the planned rate (b / w); bounds the wait (session_queue::start_at)
  #! eq
}

struct DeviceSchedule {
  device @0 :UInt32;
  dutyCycleMs @1 :Float64;  # 0: work-conserving round-robin
  sessions @2 :List(SessionSchedule);
  #! eq
}

# Controller -> one worker.
struct Schedule {
  epoch @0 :UInt64;
  devices @1 :List(DeviceSchedule);
}

# Controller (or scaler) -> worker: run this device's next batches with `threads` intra-op
# threads (vertical scaling in place; emulated devices ignore it).
struct Resize {
  device @0 :UInt32;
  threads @1 :UInt32 = 1;
}

# Client -> frontend: is the frontend ready to serve (`pipeline`: that pipeline; empty: all)?
struct StatusRequest {
  token @0 :UInt64;
  pipeline @1 :Text;
}
struct StatusReply {
  token @0 :UInt64;
  ready @1 :Bool;
  detail @2 :Text;
  dummies @3 :UInt64;  # dummy requests (Piccolo's padding) this frontend has sent since it started
}

# Operator -> controller (`sloserve apply`): move the running cluster to the configuration in
# `text` (the cluster file as written, read as `file` for its messages and relative paths) while it
# serves; `dryRun`: only say what would change. Sent as a node of the cluster (under CURVE, with
# that node's key).
struct ApplyRequest {
  token @0 :UInt64;
  text @1 :Text;
  file @2 :Text;
  dryRun @3 :Bool;
}

struct ApplyReply {
  token @0 :UInt64;
  ok @1 :Bool;  # applied (or, dry run, would apply)
  reason @2 :Text;  # why not, one refusal per line ("file:line:column: message")
  changes @3 :List(Text);  # what changes, one line each
  plan @4 :List(Text);  # what the controller does to move there, one line each
  revision @5 :UInt64;  # the revision the cluster runs now
  # Applied: what each node said of it, one line each ("w1: applied", "w1: kept the file it ran
  # for model 'm': ..."); `ok` stays true only when every node applied all of it.
  nodes @6 :List(Text);
}

# Controller -> every node: run this configuration from now on (the cluster file's text, read as
# `file`); nodes, runtime and security stay as they run.
struct ConfigUpdate {
  revision @0 :UInt64;
  text @1 :Text;
  file @2 :Text;
}

# Every node -> controller, for each ConfigUpdate it got: what it made of it. `problems` is empty
# when it runs all of the revision; else one line each (a refusal, a model whose new file failed
# to load on a device, which keeps the file it ran).
struct ConfigAck {
  revision @0 :UInt64;
  node @1 :Text;
  problems @2 :List(Text);
}

# Client -> frontend node: Triton's system shared-memory extension over ZeroMQ (on with
# runtime.client_shared_memory). `add` maps bytes [offset, offset + byteSize) of the POSIX
# shared-memory object `key` as region `name`; `remove` forgets region `name` (empty: all of the
# client's); `status` lists them (empty `name`: all). A region is the client's alone: its CurveZMQ
# key's, or, without keys, every plain client's. `pid`: the registering process, whose exit
# forgets the region (0: unknown).
enum SharedMemoryOp { status @0; add @1; remove @2; }
struct SharedMemoryRequest {
  token @0 :UInt64;  # echoed in the reply
  op @1 :SharedMemoryOp;
  name @2 :Text;
  key @3 :Text;
  offset @4 :UInt64;
  byteSize @5 :UInt64;
  pid @6 :UInt32;
}
struct SharedMemoryRegion {
  name @0 :Text;
  key @1 :Text;
  offset @2 :UInt64;
  byteSize @3 :UInt64;
}
struct SharedMemoryReply {
  token @0 :UInt64;
  ok @1 :Bool;
  reason @2 :Text;  # why not, when not ok
  regions @3 :List(SharedMemoryRegion);  # status: the regions asked for
}

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
    applyRequest @13 :ApplyRequest;
    applyReply @14 :ApplyReply;
    configUpdate @15 :ConfigUpdate;
    sharedMemoryRequest @16 :SharedMemoryRequest;
    sharedMemoryReply @17 :SharedMemoryReply;
    configAck @18 :ConfigAck;
  }
}
