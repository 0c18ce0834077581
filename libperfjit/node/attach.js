#!/usr/bin/env node
// SPDX-License-Identifier: LGPL-2.1-or-later
//
// perfjit-node-attach PID [--options OPTS] [--timeout S]: loads perfjit-node
// into a Node process that is already running and was started without it,
// so that perf record -p PID (or -a) names its JavaScript from then on.
//
// Node's own way in: SIGUSR1 opens its inspector on 127.0.0.1 (port 9229
// unless the process chose another); this connects to it, has the process
// load the addon with process.dlopen() (OPTS become its $PERFJIT_NODE),
// and, if the inspector was closed before, closes it again. It needs the
// right to signal the process (its user, or root) and no other inspector
// client attached. A process in a container must see the addon at the
// same path, and this must run in its network namespace (nsenter --net
// --target PID). It refuses a process that does not catch SIGUSR1, whose
// default action would end it. With no dependency: Node 20 has no WebSocket client, so
// the little of RFC 6455 that this needs is here.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const path = require('path');

function die(msg) {
  console.error(`perfjit-node-attach: ${msg}`);
  process.exit(1);
}

function usage() {
  die('usage: perfjit-node-attach PID [--options OPTS] [--timeout SECONDS]');
}

const args = process.argv.slice(2);
const pid = Number(args[0]);
if (!Number.isInteger(pid) || pid <= 0) usage();
let options = null;
let timeout = 10;
for (let i = 1; i < args.length; i += 2) {
  if (args[i] === '--options' && i + 1 < args.length) options = args[i + 1];
  else if (args[i] === '--timeout' && Number(args[i + 1]) > 0) timeout = Number(args[i + 1]);
  else usage();
}
const addon = path.join(__dirname, 'perfjit-node.node');

// The TCP ports on which @pid listens on a loopback address (IPv4 or
// IPv6): its socket inodes matched against LISTEN entries of its network
// namespace's /proc/net/tcp and tcp6.
function listeningPorts(pid) {
  const inodes = new Set();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch (e) {
      // The fd was closed meanwhile.
    }
  }
  const ports = [];
  for (const table of ['tcp', 'tcp6']) {
    let text = '';
    try {
      text = fs.readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch (e) {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local address, state 0A (LISTEN), inode
      if (f.length > 9 && f[3] === '0A' && inodes.has(f[9]))
        ports.push(parseInt(f[1].split(':')[1], 16));
    }
  }
  return ports;
}

// Whether @pid catches SIGUSR1 (Node's inspector does): its default action
// would end the process.
function catchesSigusr1(pid) {
  const m = /^SigCgt:\s*([0-9a-f]+)$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m && (BigInt('0x' + m[1]) >> 9n) & 1n;
}

function getJson(port, what) {
  return new Promise((resolve, reject) => {
    const req = http.get({host: 'localhost', port, path: what, timeout: 2000}, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => {
        try {
          resolve(JSON.parse(body));
        } catch (e) {
          reject(e);
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
}

// The port of @pid's inspector, if one listens: the listener that answers
// /json/version as Node.
async function inspectorPort(pid) {
  for (const port of listeningPorts(pid)) {
    try {
      const v = await getJson(port, '/json/version');
      if (v && typeof v.Browser === 'string' && v.Browser.startsWith('node.js/')) return port;
    } catch (e) {
      // Not the inspector.
    }
  }
  return 0;
}

// A WebSocket to @url that sends text frames and hands each text frame
// received to @onMessage.
function connect(url, onMessage) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const key = crypto.randomBytes(16).toString('base64');
    const req = http.request({
      host: u.hostname, port: u.port, path: u.pathname,
      headers: {Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Key': key,
                'Sec-WebSocket-Version': '13'},
    });
    req.on('error', reject);
    req.on('response', (res) => reject(new Error(`the inspector answered ${res.statusCode}`)));
    req.on('upgrade', (res, socket) => {
      const accept = crypto.createHash('sha1')
                         .update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11')
                         .digest('base64');
      if (res.headers['sec-websocket-accept'] !== accept)
        return reject(new Error('not a WebSocket answer'));
      let buf = Buffer.alloc(0);
      socket.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        for (;;) {
          if (buf.length < 2) return;
          let len = buf[1] & 0x7f, off = 2;
          if (len === 126) {
            if (buf.length < 4) return;
            len = buf.readUInt16BE(2);
            off = 4;
          } else if (len === 127) {
            if (buf.length < 10) return;
            len = Number(buf.readBigUInt64BE(2));
            off = 10;
          }
          if (buf.length < off + len) return;
          const opcode = buf[0] & 0x0f;
          const payload = buf.subarray(off, off + len);
          buf = buf.subarray(off + len);
          if (opcode === 1) onMessage(payload.toString('utf8'));
        }
      });
      socket.on('error', () => {});
      resolve({
        send(text) {
          const data = Buffer.from(text, 'utf8');
          const mask = crypto.randomBytes(4);
          const head = data.length < 126 ? Buffer.from([0x81, 0x80 | data.length])
              : data.length < 65536     ? Buffer.from([0x81, 0x80 | 126, data.length >> 8, data.length & 0xff])
                                        : null;
          if (!head) throw new Error('message too long');
          const body = Buffer.from(data.map((b, i) => b ^ mask[i % 4]));
          socket.write(Buffer.concat([head, mask, body]));
        },
        close() {
          socket.end(Buffer.from([0x88, 0x80, 0, 0, 0, 0]));
        },
      });
    });
    req.end();
  });
}

async function main() {
  if (!fs.existsSync(`/proc/${pid}`)) die(`no process ${pid}`);
  if (!fs.existsSync(addon)) die(`${addon} is not there`);
  let port = await inspectorPort(pid);
  const opened = !port;
  if (opened) {
    if (!catchesSigusr1(pid)) die(`process ${pid} does not catch SIGUSR1: not Node, or Node without its inspector`);
    try {
      process.kill(pid, 'SIGUSR1');
    } catch (e) {
      die(`cannot signal ${pid}: ${e.message}`);
    }
  }
  const end = Date.now() + timeout * 1000;
  let url = null;
  while (!url && Date.now() < end) {
    if (!port) port = await inspectorPort(pid);
    if (port) {
      try {
        const list = await getJson(port, '/json/list');
        if (Array.isArray(list) && list.length && list[0].webSocketDebuggerUrl) url = list[0].webSocketDebuggerUrl;
      } catch (e) {
        // Not ready yet.
      }
    }
    if (!url) await new Promise((r) => setTimeout(r, 100));
  }
  if (!url) die(`process ${pid} opened no inspector within ${timeout} s`);

  const pending = new Map();
  let nextId = 1;
  const ws = await connect(url, (text) => {
    let msg;
    try {
      msg = JSON.parse(text);
    } catch (e) {
      return;
    }
    if (msg.id && pending.has(msg.id)) {
      pending.get(msg.id)(msg);
      pending.delete(msg.id);
    }
  });
  const send = (expression) => {
    const id = nextId++;
    ws.send(JSON.stringify({id, method: 'Runtime.evaluate', params: {expression, returnByValue: true}}));
    return id;
  };
  // The inspector was opened for this: closed again, whatever happens
  // next (it lets any local user run code as the process's user). It
  // closes this connection too, before any answer.
  const close = async () => {
    if (opened) {
      send('process._debugEnd()');
      await new Promise((r) => setTimeout(r, 300));
    }
    ws.close();
  };
  const timer = setTimeout(async () => {
    await close();
    die(`process ${pid} did not answer within ${timeout} s`);
  }, Math.max(1000, end - Date.now()));
  // $PERFJIT_NODE for the addon alone: put back as it was, so that the
  // process's children do not inherit it.
  const load = `(() => {
    const had = Object.prototype.hasOwnProperty.call(process.env, 'PERFJIT_NODE');
    const was = process.env.PERFJIT_NODE;
    ${options === null ? '' : `process.env.PERFJIT_NODE = ${JSON.stringify(options)};`}
    try {
      const m = { exports: {} };
      process.dlopen(m, ${JSON.stringify(addon)});
    } finally {
      if (had) process.env.PERFJIT_NODE = was; else delete process.env.PERFJIT_NODE;
    }
    return 'loaded';
  })()`;
  const res = await new Promise((resolve) => pending.set(send(load), resolve));
  clearTimeout(timer);
  await close();
  const err = res.error ? res.error.message
      : res.result && res.result.exceptionDetails
      ? (res.result.exceptionDetails.exception || {}).description || res.result.exceptionDetails.text
      : null;
  if (err) die(`process ${pid} could not load perfjit-node: ${err}`);
  console.log(`perfjit-node-attach: perfjit-node loaded into ${pid} (inspector on port ${port}${
      opened ? ', closed again' : ''})`);
}

main().catch((e) => die(e.message));
