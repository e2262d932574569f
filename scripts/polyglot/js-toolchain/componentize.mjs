// componentize.mjs: componentize-js's command line with one change to the JavaScript
// bindings it generates: imported resources (the host arrays of the `arrays` interface)
// are not registered with a FinalizationRegistry.
//
// Usage: node componentize.mjs <componentize-js's src/cli.js> <its arguments ...>
//
// Why: the bindings register every resource object the host returns with a
// FinalizationRegistry (and unregister it when the resource is passed as an argument or
// disposed). StarlingMonkey's SpiderMonkey keeps each registered object, and its record, in
// the tenured heap until a full collection, which it runs only when the heap nears
// ~110 MB: a plugin that makes a few host arrays per tile grows its memory by that much
// (docs/plugins/js.md, "Host arrays"). Without the registry a host array's JavaScript
// object dies young, in the nursery. Nothing is lost: the registry only dropped
// resources the plugin forgot, and the host frees every array of a call or partition
// when it ends.
//
// componentize-js writes the bindings to `initializer.js` before it runs them; this
// wraps node's `fs.promises.writeFile` for that one file. Pinned to the componentize-js
// of package-lock.json: a build fails if the bindings register resources in a form this
// does not recognise.
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { pathToFileURL } from 'node:url';

const [cli, ...args] = process.argv.slice(2);
if (!cli) {
  console.error("usage: node componentize.mjs <componentize-js's src/cli.js> <arguments ...>");
  process.exit(2);
}

const REGISTRY = 'new FinalizationRegistry(';
const NO_REGISTRY = 'new (class { register() {} unregister() {} })(';

/** The bindings without finalization registries (`source` unchanged if it has none). */
export function withoutFinalizers(source) {
  const patched = source.replaceAll(REGISTRY, NO_REGISTRY);
  if (patched.includes('FinalizationRegistry')) {
    throw new Error(
      'componentize.mjs: the generated bindings use FinalizationRegistry in a form it does not know; ' +
        'is componentize-js the version scripts/polyglot/js-toolchain/package-lock.json pins?',
    );
  }
  return patched;
}

let sawBindings = false;
const writeFile = fs.promises.writeFile;
fs.promises.writeFile = function (path, data, ...rest) {
  const bindings = typeof path === 'string' && path.endsWith('initializer.js') && typeof data === 'string';
  sawBindings ||= bindings;
  return writeFile.call(this, path, bindings ? withoutFinalizers(data) : data, ...rest);
};
syncBuiltinESMExports();
// A componentize-js that writes its bindings another way would build a component with
// the registry: fail instead.
process.on('exit', (code) => {
  if (code === 0 && (args.includes('-o') || args.includes('--out')) && !sawBindings) {
    console.error('componentize.mjs: componentize-js wrote no initializer.js, so its bindings were not changed; ' +
      'is it the version scripts/polyglot/js-toolchain/package-lock.json pins?');
    process.exitCode = 1;
  }
});

process.argv = [process.argv[0], cli, ...args];
await import(pathToFileURL(cli).href);
