// apply.mjs applies update files (written by Go, or anyone) to a fresh Y.Doc
// in the given order and prints the normalised document, one JSON line:
//   {"roots":{name:type},"json":{...},"deltas":{...},"sv":{client:clock},"pending":bool,"client":"<own id>"}
//
//   node yjs/apply.mjs [--roots name:type,...] [--cleanup] [--encode OUT] FILE...
//   node yjs/apply.mjs --batch JOBS.json
//
// A batch file is [{"files":[...],"roots":{name:type},"cleanup":bool,"encode":FILE}, ...]; the output is then
// one JSON line per job, in order; a job that throws prints {"error":"..."}.
// Root types are map|array|text|xmlfragment; unnamed roots are inferred.
// By default the doc only integrates (no Yjs formatting cleanup ops of its own),
// --cleanup keeps Yjs's normal behaviour.
import * as Y from 'yjs'
import fs from 'node:fs'
import { parseArgs } from 'node:util'
import { parseRootsArg, snapshot, stringify } from './lib.mjs'

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    roots: { type: 'string' },
    batch: { type: 'string' },
    encode: { type: 'string' },
    cleanup: { type: 'boolean', default: false }
  }
})

function applyFiles (files, roots, encode, cleanup = values.cleanup) {
  const doc = new Y.Doc()
  if (!cleanup) doc.on('afterTransaction', (tr) => { tr._needFormattingCleanup = false })
  for (const f of files) Y.applyUpdate(doc, new Uint8Array(fs.readFileSync(f)), 'remote')
  if (encode) fs.writeFileSync(encode, Y.encodeStateAsUpdate(doc))
  // client: the doc's own id (its cleanup ops, if any, are under it)
  return { ...snapshot(doc, roots), client: String(doc.clientID) }
}

if (values.batch) {
  const jobs = JSON.parse(fs.readFileSync(values.batch, 'utf8'))
  const out = []
  for (const job of jobs) {
    try {
      out.push(stringify(applyFiles(job.files, job.roots || {}, job.encode, job.cleanup ?? values.cleanup)))
    } catch (e) {
      out.push(JSON.stringify({ error: String(e && e.stack ? e.stack : e) }))
    }
  }
  process.stdout.write(out.join('\n') + '\n')
} else {
  if (positionals.length === 0) {
    console.error('usage: node yjs/apply.mjs [--roots name:type,...] [--encode OUT] FILE... | --batch JOBS.json')
    process.exit(2)
  }
  process.stdout.write(stringify(applyFiles(positionals, parseRootsArg(values.roots), values.encode)) + '\n')
}
