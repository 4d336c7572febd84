// Validates Kubernetes manifests against the API's schemas with kubernetes-models (npm): each
// object is built as its apiVersion and kind's model and validated (ajv, the OpenAPI schemas of
// the Kubernetes API). Prints one line per object that fails; exits 1 if any does.
//
//   node validate_k8s.mjs MANIFESTS.json NODE_MODULES
// MANIFESTS.json: a JSON list of [where, object]; NODE_MODULES: where kubernetes-models is installed.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

const objects = JSON.parse(readFileSync(process.argv[2], "utf8"));
const require = createRequire(join(resolve(process.argv[3]), "index.js"));
let failed = 0;
for (const [where, object] of objects) {
  const group = object.apiVersion;  // "v1" or "apps/v1"
  let model;
  try {
    model = require(`kubernetes-models/${group}/${object.kind}`)[object.kind];
  } catch (e) {
    console.log(`${where}: no schema for ${group} ${object.kind}`);
    failed++;
    continue;
  }
  try {
    new model(object).validate();
  } catch (e) {
    console.log(`${where}: ${object.kind} ${object.metadata?.name}: ${e.message}`);
    failed++;
  }
}
console.log(failed ? `${failed} of ${objects.length} objects fail their schema` : `${objects.length} objects valid`);
process.exit(failed ? 1 : 0);
