// cdk.json runs this before bin/app.ts. Node runs a .ts file as it is (type stripping) from 22.18
// on; an older Node fails on bin/app.ts with ERR_UNKNOWN_FILE_EXTENSION, which does not say why.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `This app runs bin/app.ts with Node's built-in TypeScript support: Node.js 22.18 or newer ` +
      `(this is ${process.version}). Install a newer Node (nvm install 24), then run cdk again.\n`,
  );
  process.exit(1);
}
