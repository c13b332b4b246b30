// Bundles the page into ../assets (embedded by the Go package). Same
// inputs, same bytes: no timestamps, no absolute paths, a pinned esbuild.
import { build } from 'esbuild';
import { copyFile, mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', 'assets');

for (const f of ['index.html', 'app.js', 'app.css']) await rm(join(out, f), { force: true });
await mkdir(out, { recursive: true });
const result = await build({
  absWorkingDir: here,
  entryPoints: { app: 'src/main.js' },
  bundle: true,
  format: 'esm',
  target: ['chrome110', 'firefox115', 'safari16'],
  minify: true,
  legalComments: 'eof',
  sourcemap: false,
  outdir: out,
  logLevel: 'warning',
  metafile: true,
});
await copyFile(join(here, 'index.html'), join(out, 'index.html'));
for (const [file, { bytes }] of Object.entries(result.metafile.outputs)) {
  console.log(`${file.replace(/^.*assets\//, 'assets/')}: ${bytes} bytes`);
}
