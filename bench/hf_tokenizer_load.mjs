// The baseline of bench_tokenizer's load benchmarks: Hugging Face's Rust tokenizers library (the npm package
// `tokenizers`, its Node binding) loading a tokenizer.json with Tokenizer.fromFile. Prints, for each load, one line
// "<wall seconds> <CPU seconds of the process>", timed inside one node process (node's start and the binding's
// loading are not counted).
//   node hf_tokenizer_load.mjs <dir with node_modules/tokenizers> <tokenizer.json> <loads>
import path from "node:path";
import { createRequire } from "node:module";

const [packageDir, file, loads] = process.argv.slice(2);
if (!packageDir || !file) {
  console.error("usage: node hf_tokenizer_load.mjs <dir with node_modules/tokenizers> <tokenizer.json> [loads]");
  process.exit(2);
}
const { Tokenizer } = createRequire(path.join(path.resolve(packageDir), "noop.js"))("tokenizers");
for (let i = 0; i < Number(loads ?? 1); ++i) {
  const cpuStart = process.cpuUsage();
  const start = process.hrtime.bigint();
  const tokenizer = Tokenizer.fromFile(file);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const cpu = process.cpuUsage(cpuStart);
  if (tokenizer.getVocabSize(true) <= 0) process.exit(1);
  console.log(seconds.toFixed(6), ((cpu.user + cpu.system) / 1e6).toFixed(6));
}
