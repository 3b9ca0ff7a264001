// @hey-api/openapi-ts's configuration (`npm run generate`): the spec as it
// is, to src/client (generated at test time, never committed), with the
// fetch client it bundles; imports end in .js for Node's ESM resolution.
export default {
  input: "../../../docs/openapi.json",
  output: { path: "src/client", importFileExtension: ".js" },
};
