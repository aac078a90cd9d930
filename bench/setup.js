// Prepares the same chain state on a node for `just bench` and sends the Engine API head update
// for the execution-apis chain. Needs viem (NODE_PATH points at the bench tools cache).
//
//   node setup.js state URL KIT_DIR OUT_JSON MODE   MODE: anvil (automine off + evm_mine) | interval (dev.block-time)
//   node setup.js fcu   ENGINE_URL JWT_HEX_FILE FCU_JSON_FILE
//
// `state` sends, from the test-mnemonic accounts with locally signed EIP-1559 transactions:
//   1. Callee and Caller(callee) from /work/shared/bench/contracts/Test.json (account 0, nonces 0 and 1)
//   2. one block of 50 transactions: 25 Caller.ping(n, to) with 1000 wei (3 logs, a nested call, a transfer)
//      and 25 plain transfers, senders round-robin over accounts 0..9.
// Every node gets the same transactions in the same order. It then checks the 50 landed in one block and
// writes {from, caller, callee, block50, block50Txs} to OUT_JSON.
'use strict';
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const { encodeFunctionData, encodeDeployData, getContractAddress } = require('viem');
const { mnemonicToAccount } = require('viem/accounts');

const MNEMONIC = 'test test test test test test test test test test test junk';
const TO = '0x2222222222222222222222222222222222222222';

async function rpc(url, method, params = [], headers = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const text = await res.text();
  let v;
  try { v = JSON.parse(text); } catch { throw new Error(`${method}: HTTP ${res.status}: ${text.slice(0, 300)}`); }
  if (v.error) throw new Error(`${method}: ${JSON.stringify(v.error)}`);
  return v.result;
}

async function rpcBatch(url, calls) {
  const body = calls.map(([method, params], i) => ({ jsonrpc: '2.0', id: i + 1, method, params }));
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const v = JSON.parse(await res.text());
  if (!Array.isArray(v)) throw new Error(`batch answer: ${JSON.stringify(v).slice(0, 300)}`);
  for (const r of v) if (r.error) throw new Error(`batch entry ${r.id}: ${JSON.stringify(r.error)}`);
  return v.sort((a, b) => a.id - b.id).map((r) => r.result);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitReceipt(url, hash, timeoutMs = 30000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const r = await rpc(url, 'eth_getTransactionReceipt', [hash]);
    if (r) return r;
    if (Date.now() > end) throw new Error(`no receipt for ${hash} after ${timeoutMs} ms`);
    await sleep(100);
  }
}

async function state(url, kitDir, outJson, mode) {
  const T = require(path.resolve(kitDir, 'contracts/Test.json')).contracts;
  const accounts = Array.from({ length: 10 }, (_, i) => mnemonicToAccount(MNEMONIC, { addressIndex: i }));
  const chainId = Number(await rpc(url, 'eth_chainId'));
  const latest = await rpc(url, 'eth_getBlockByNumber', ['latest', false]);
  const baseFee = BigInt(latest.baseFeePerGas || '0x0');
  const tip = 1_000_000_000n;
  const maxFee = baseFee * 3n + tip;
  const nonces = await Promise.all(accounts.map((a) => rpc(url, 'eth_getTransactionCount', [a.address, 'latest']).then(Number)));
  const sign = async (i, tx) => {
    const raw = await accounts[i].signTransaction({
      type: 'eip1559', chainId, nonce: nonces[i]++, maxFeePerGas: maxFee, maxPriorityFeePerGas: tip, ...tx,
    });
    return raw;
  };
  const anvil = mode === 'anvil';
  if (anvil) await rpc(url, 'evm_setAutomine', [false]);
  const mine = async () => { if (anvil) await rpc(url, 'evm_mine', []); };

  // 1. contracts
  const deployer = accounts[0].address;
  const calleeAddr = getContractAddress({ from: deployer, nonce: BigInt(nonces[0]) });
  const callerAddr = getContractAddress({ from: deployer, nonce: BigInt(nonces[0] + 1) });
  const d1 = await sign(0, { gas: 1_000_000n, data: T.Callee.bytecode });
  const d2 = await sign(0, {
    gas: 1_500_000n,
    data: encodeDeployData({ abi: T.Caller.abi, bytecode: T.Caller.bytecode, args: [calleeAddr] }),
  });
  const [h1, h2] = await rpcBatch(url, [['eth_sendRawTransaction', [d1]], ['eth_sendRawTransaction', [d2]]]);
  await mine();
  for (const h of [h1, h2]) {
    const r = await waitReceipt(url, h);
    if (r.status !== '0x1') throw new Error(`deployment ${h} failed: ${JSON.stringify(r)}`);
  }
  const code = await rpc(url, 'eth_getCode', [callerAddr, 'latest']);
  if (!code || code.length < 10) throw new Error(`no code at Caller ${callerAddr}`);

  // 2. the 50-transaction block
  const raws = [];
  for (let k = 0; k < 50; k++) {
    const i = k % 10;
    if (k % 2 === 0) {
      const data = encodeFunctionData({ abi: T.Caller.abi, functionName: 'ping', args: [BigInt(k + 2), TO] });
      raws.push(await sign(i, { to: callerAddr, gas: 200_000n, value: 1000n, data }));
    } else {
      raws.push(await sign(i, { to: TO, gas: 21_000n, value: BigInt(k) }));
    }
  }
  if (!anvil) {
    // interval mining: send right after a block so that all 50 go into the next one
    const b0 = Number(await rpc(url, 'eth_blockNumber'));
    for (let t = 0; Number(await rpc(url, 'eth_blockNumber')) === b0; t++) {
      if (t > 300) throw new Error('node does not mine on its interval');
      await sleep(20);
    }
  }
  const hashes = await rpcBatch(url, raws.map((r) => ['eth_sendRawTransaction', [r]]));
  await mine();
  const receipts = [];
  for (const h of hashes) receipts.push(await waitReceipt(url, h));
  if (anvil) await rpc(url, 'evm_setAutomine', [true]);
  const blocks = [...new Set(receipts.map((r) => r.blockNumber))];
  const failed = receipts.filter((r) => r.status !== '0x1').length;
  if (failed) throw new Error(`${failed} of the 50 transactions failed`);
  if (blocks.length !== 1) throw new Error(`the 50 transactions landed in ${blocks.length} blocks: ${blocks.join(' ')}`);
  const block = await rpc(url, 'eth_getBlockByNumber', [blocks[0], false]);
  const out = {
    from: accounts[0].address, caller: callerAddr, callee: calleeAddr,
    block50: blocks[0], block50Txs: block.transactions.length, chainId,
  };
  if (out.block50Txs < 50) throw new Error(`block ${blocks[0]} has ${out.block50Txs} transactions`);
  fs.writeFileSync(outJson, JSON.stringify(out, null, 2));
  console.log(`state ready: Callee ${calleeAddr}, Caller ${callerAddr}, block ${blocks[0]} with ${out.block50Txs} transactions`);
}

function jwt(secretHex) {
  const key = Buffer.from(secretHex.trim().replace(/^0x/, ''), 'hex');
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const unsigned = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64({ iat: Math.floor(Date.now() / 1000) })}`;
  return `${unsigned}.${crypto.createHmac('sha256', key).update(unsigned).digest('base64url')}`;
}

async function fcu(engineUrl, jwtFile, fcuFile) {
  const req = JSON.parse(fs.readFileSync(fcuFile, 'utf8'));
  const secret = fs.readFileSync(jwtFile, 'utf8');
  for (let t = 0; ; t++) {
    try {
      const r = await rpc(engineUrl, req.method, req.params, { authorization: `Bearer ${jwt(secret)}` });
      const status = r && r.payloadStatus && r.payloadStatus.status;
      if (status !== 'VALID') throw new Error(`forkchoiceUpdated: ${JSON.stringify(r)}`);
      console.log('forkchoiceUpdated: VALID');
      return;
    } catch (e) {
      if (t > 100 || !/fetch failed|ECONNREFUSED/.test(String(e.cause || e))) throw e;
      await sleep(100);
    }
  }
}

const [cmd, ...args] = process.argv.slice(2);
const run = cmd === 'state' ? state(...args) : cmd === 'fcu' ? fcu(...args) : Promise.reject(new Error(`unknown command ${cmd}`));
run.catch((e) => { console.error(`setup.js ${cmd}: ${e.message || e}`); process.exit(1); });
