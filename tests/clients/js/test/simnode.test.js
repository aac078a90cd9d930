// viem against a running simnode dev node, over HTTP and over WebSocket.
//
// Run by ../../run.sh, which starts `target/release/simnode node --dev` and passes
// SIMNODE_HTTP_URL (http://127.0.0.1:PORT/v3/KEY) and SIMNODE_WS_URL (ws://.../ws/v3/KEY).
// The suite sends its own transactions first (a transfer, a contract deployment and a call
// that emits an event), then checks what a viem user would look at: receipts, simulated
// blocks and calls, and raw trace_callMany answers.

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'

import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  decodeEventLog,
  defineChain,
  getContractAddress,
  hexToBigInt,
  http,
  pad,
  parseAbi,
  parseEther,
  parseGwei,
  toHex,
  verifyMessage,
  verifyTypedData,
  webSocket,
  zeroAddress,
} from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'

const HTTP_URL = process.env.SIMNODE_HTTP_URL
const WS_URL = process.env.SIMNODE_WS_URL
if (!HTTP_URL || !WS_URL) {
  throw new Error('SIMNODE_HTTP_URL and SIMNODE_WS_URL must point at a simnode dev node (tests/clients/run.sh sets them)')
}

const contracts = JSON.parse(readFileSync(new URL('../../contracts.json', import.meta.url), 'utf8'))
const storedAbi = parseAbi([contracts.storedEvent])

// Dev accounts 4 and 5 of the test mnemonic (the Python suite uses others), each with 10,000 ETH.
const sender = privateKeyToAccount('0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a')
const simulator = privateKeyToAccount('0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba')
const TEN_THOUSAND_ETH = parseEther('10000')

const devChain = defineChain({
  id: 1337,
  name: 'simnode dev',
  nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
  rpcUrls: { default: { http: [HTTP_URL], webSocket: [WS_URL] } },
})

const word = (n) => pad(toHex(n), { size: 32 })
const addrTopic = (a) => pad(a.toLowerCase(), { size: 32 })

// What the setup sent, filled by the top-level `before`.
const sent = {}

before(async () => {
  const client = createPublicClient({ chain: devChain, transport: http(HTTP_URL), pollingInterval: 100 })
  const wallet = createWalletClient({ account: sender, chain: devChain, transport: http(HTTP_URL) })

  assert.equal(await client.getChainId(), 1337)
  assert.equal(await client.getBalance({ address: simulator.address }), TEN_THOUSAND_ETH,
    'the simulating account must be untouched (fresh dev chain)')

  // 1. A plain transfer to a fresh address.
  sent.recipient = privateKeyToAccount(generatePrivateKey()).address
  sent.transferValue = parseEther('1.5')
  sent.transferHash = await wallet.sendTransaction({ to: sent.recipient, value: sent.transferValue })
  sent.transfer = await client.waitForTransactionReceipt({ hash: sent.transferHash, timeout: 30_000 })

  // 2. Deploy the Store contract.
  sent.deployNonce = await client.getTransactionCount({ address: sender.address })
  sent.deployHash = await wallet.sendTransaction({ data: contracts.storeInitCode })
  sent.deploy = await client.waitForTransactionReceipt({ hash: sent.deployHash, timeout: 30_000 })
  sent.contract = getContractAddress({ from: sender.address, nonce: BigInt(sent.deployNonce) })

  // 3. Call it: stores 42 and emits Stored(sender, 42).
  sent.callHash = await wallet.sendTransaction({ to: sent.contract, data: word(42n) })
  sent.call = await client.waitForTransactionReceipt({ hash: sent.callHash, timeout: 30_000 })

  // 4. Three transactions in one block: store(100), a transfer, store(101). Sent with the
  // nonces in reverse so that the first two wait in the pool behind a nonce gap and all
  // three become executable together when the lowest arrives.
  const nonce = await client.getTransactionCount({ address: sender.address })
  const fees = { maxFeePerGas: parseGwei('20'), maxPriorityFeePerGas: parseGwei('1') }
  sent.batchRecipient = privateKeyToAccount(generatePrivateKey()).address
  const batch = [
    { nonce, to: sent.contract, data: word(100n), gas: 100_000n, ...fees },
    { nonce: nonce + 1, to: sent.batchRecipient, value: 7n, gas: 21_000n, ...fees },
    { nonce: nonce + 2, to: sent.contract, data: word(101n), gas: 100_000n, ...fees },
  ]
  const raws = await Promise.all(batch.map((tx) => wallet.signTransaction(tx)))
  sent.batchHashes = []
  for (const i of [2, 1, 0]) sent.batchHashes[i] = await wallet.sendRawTransaction({ serializedTransaction: raws[i] })
  sent.batch = await Promise.all(sent.batchHashes.map((hash) => client.waitForTransactionReceipt({ hash, timeout: 30_000 })))
  assert.deepEqual(sent.batch.map((r) => r.blockNumber), Array(3).fill(sent.batch[0].blockNumber),
    'the dev miner should put the three transactions released together into one block')
  sent.stored = 101n

  for (const r of [sent.transfer, sent.deploy, sent.call, ...sent.batch]) assert.equal(r.status, 'success')
  sent.head = await client.getBlockNumber({ cacheTime: 0 })
})

const transports = [
  ['HTTP', () => http(HTTP_URL)],
  ['WebSocket', () => webSocket(WS_URL)],
]

for (const [name, makeTransport] of transports) {
  describe(`viem over ${name}`, () => {
    let client

    before(async () => {
      client = createPublicClient({ chain: devChain, transport: makeTransport(), pollingInterval: 100 })
      // Fail early and clearly if the transport cannot reach the node at all.
      assert.equal(await client.getChainId(), 1337)
    })

    after(async () => {
      if (name === 'WebSocket') {
        const rpc = await client.transport.getRpcClient()
        rpc.close()
      }
    })

    test('getBlockReceipts: the transfer block', async () => {
      const receipts = await client.getBlockReceipts({ blockNumber: sent.transfer.blockNumber })
      assert.equal(receipts.length, 1)
      const [r] = receipts
      assert.equal(r.transactionHash, sent.transferHash)
      assert.equal(r.status, 'success')
      assert.equal(r.type, 'eip1559')
      assert.equal(r.from, sender.address.toLowerCase())
      assert.equal(r.to, sent.recipient.toLowerCase())
      assert.equal(r.gasUsed, 21000n)
      assert.equal(r.cumulativeGasUsed, 21000n)
      assert.equal(r.contractAddress, null)
      assert.deepEqual(r.logs, [])
      assert.equal(r.logsBloom, `0x${'0'.repeat(512)}`)
      assert.equal(r.transactionIndex, 0)
      assert.equal(r.blockNumber, sent.transfer.blockNumber)
      assert.ok(r.effectiveGasPrice > 0n, 'effectiveGasPrice must be set on a London chain')

      const block = await client.getBlock({ blockNumber: sent.transfer.blockNumber })
      assert.equal(r.blockHash, block.hash)
      assert.equal(r.effectiveGasPrice >= block.baseFeePerGas, true)
      // The same receipt as eth_getTransactionReceipt gives.
      assert.deepEqual(r, await client.getTransactionReceipt({ hash: sent.transferHash }))
      // And the transfer really happened.
      assert.equal(await client.getBalance({ address: sent.recipient }), sent.transferValue)
    })

    test('getBlockReceipts: the deployment block, by block hash', async () => {
      const receipts = await client.getBlockReceipts({ blockHash: sent.deploy.blockHash })
      assert.equal(receipts.length, 1)
      const [r] = receipts
      assert.equal(r.transactionHash, sent.deployHash)
      assert.equal(r.status, 'success')
      assert.equal(r.to, null)
      assert.equal(r.contractAddress, sent.contract.toLowerCase())
      assert.ok(r.gasUsed > 53000n, `a creation costs more than 53000 gas, got ${r.gasUsed}`)
      assert.deepEqual(r.logs, [])
      assert.equal(await client.getCode({ address: sent.contract }), contracts.storeRuntime)
    })

    test('getBlockReceipts: the event block has the Stored log', async () => {
      const receipts = await client.getBlockReceipts({ blockNumber: sent.call.blockNumber })
      assert.equal(receipts.length, 1)
      const [r] = receipts
      assert.equal(r.status, 'success')
      assert.equal(r.to, sent.contract.toLowerCase())
      assert.equal(r.logs.length, 1)
      const [log] = r.logs
      assert.equal(log.address, sent.contract.toLowerCase())
      assert.deepEqual(log.topics, [contracts.storedTopic, addrTopic(sender.address)])
      assert.equal(log.data, word(42n))
      assert.equal(log.logIndex, 0)
      assert.equal(log.transactionIndex, 0)
      assert.equal(log.transactionHash, sent.callHash)
      assert.equal(log.blockHash, r.blockHash)
      assert.equal(log.blockNumber, sent.call.blockNumber)
      assert.equal(log.removed, false)
      assert.notEqual(r.logsBloom, `0x${'0'.repeat(512)}`)
      const decoded = decodeEventLog({ abi: storedAbi, data: log.data, topics: log.topics })
      assert.equal(decoded.eventName, 'Stored')
      assert.equal(decoded.args.sender, sender.address)
      assert.equal(decoded.args.value, 42n)
      assert.deepEqual(r, await client.getTransactionReceipt({ hash: sent.callHash }))
      // The event's value is what the chain stored at that block.
      assert.equal(await client.getStorageAt({ address: sent.contract, slot: '0x0', blockNumber: sent.call.blockNumber }), word(42n))
    })

    test('getBlockReceipts: a block with three transactions', async () => {
      const blockNumber = sent.batch[0].blockNumber
      const receipts = await client.getBlockReceipts({ blockNumber })
      assert.deepEqual(receipts.map((r) => r.transactionHash), sent.batchHashes)
      assert.deepEqual(receipts.map((r) => r.transactionIndex), [0, 1, 2])
      assert.deepEqual(receipts.map((r) => r.status), ['success', 'success', 'success'])
      assert.equal(receipts[1].gasUsed, 21000n)
      assert.equal(receipts[0].cumulativeGasUsed, receipts[0].gasUsed)
      assert.equal(receipts[1].cumulativeGasUsed, receipts[0].gasUsed + 21000n)
      assert.equal(receipts[2].cumulativeGasUsed, receipts[1].cumulativeGasUsed + receipts[2].gasUsed)
      // Log indexes count through the block, not per transaction.
      assert.deepEqual(receipts.map((r) => r.logs.map((l) => l.logIndex)), [[0], [], [1]])
      assert.deepEqual(receipts[0].logs[0].topics, [contracts.storedTopic, addrTopic(sender.address)])
      assert.equal(receipts[0].logs[0].data, word(100n))
      assert.equal(receipts[2].logs[0].data, word(101n))
      assert.equal(receipts[2].logs[0].transactionIndex, 2)
      assert.equal(receipts[2].logs[0].transactionHash, sent.batchHashes[2])
      const block = await client.getBlock({ blockNumber })
      assert.deepEqual(block.transactions, sent.batchHashes)
      assert.equal(block.gasUsed, receipts[2].cumulativeGasUsed)
      for (const r of receipts) assert.equal(r.blockHash, block.hash)
      assert.deepEqual(receipts, await Promise.all(sent.batchHashes.map((hash) => client.getTransactionReceipt({ hash }))))
      assert.equal(await client.getBalance({ address: sent.batchRecipient }), 7n)
    })

    test('simulateBlocks: transfer, event and revert over two blocks, chain unchanged', async () => {
      const fresh = privateKeyToAccount(generatePrivateKey()).address
      const balanceOf = privateKeyToAccount(generatePrivateKey()).address
      const value = parseEther('2')
      const blocks = await client.simulateBlocks({
        returnFullTransactions: true,
        blocks: [
          {
            calls: [
              { account: simulator.address, to: fresh, value },
              { account: simulator.address, to: sent.contract, data: word(7n) },
            ],
          },
          {
            stateOverrides: [{ address: balanceOf, code: contracts.balanceOfRuntime }],
            calls: [
              { account: simulator.address, to: balanceOf, data: pad(fresh, { size: 32 }) },
              { account: simulator.address, to: balanceOf, data: pad(simulator.address, { size: 32 }) },
              { account: simulator.address, to: sent.contract, data: word(0n) },
            ],
          },
        ],
      })
      const head = await client.getBlock({ blockNumber: sent.head })
      assert.equal(blocks.length, 2)
      assert.equal(blocks[0].number, sent.head + 1n)
      assert.equal(blocks[1].number, sent.head + 2n)
      assert.equal(blocks[0].parentHash, head.hash)
      assert.equal(blocks[1].parentHash, blocks[0].hash)
      assert.equal(blocks[1].timestamp - blocks[0].timestamp, 12n)

      const [transfer, store] = blocks[0].calls
      assert.equal(transfer.status, 'success')
      assert.equal(transfer.gasUsed, 21000n)
      assert.deepEqual(transfer.logs, [])
      assert.equal(store.status, 'success')
      assert.equal(store.data, word(7n))
      assert.equal(store.logs.length, 1)
      assert.equal(store.logs[0].address, sent.contract.toLowerCase())
      assert.deepEqual(store.logs[0].topics, [contracts.storedTopic, addrTopic(simulator.address)])
      assert.equal(store.logs[0].data, word(7n))
      assert.equal(blocks[0].gasUsed, transfer.gasUsed + store.gasUsed)

      // The simulated transactions, in full: unsigned type-2, nonces counted from the chain's.
      const txs = blocks[0].transactions
      assert.equal(txs.length, 2)
      assert.equal(txs[0].from, simulator.address.toLowerCase())
      assert.equal(txs[0].to, fresh.toLowerCase())
      assert.equal(txs[0].value, value)
      assert.equal(txs[0].type, 'eip1559')
      assert.equal(txs[0].chainId, 1337)
      assert.deepEqual(txs.map((t) => t.nonce), [0, 1])
      assert.deepEqual(txs.map((t) => t.transactionIndex), [0, 1])
      assert.equal(txs[1].input, word(7n))
      for (const t of txs) {
        assert.equal(t.blockHash, blocks[0].hash)
        assert.equal(t.blockNumber, blocks[0].number)
      }
      assert.deepEqual(blocks[1].transactions.map((t) => t.nonce), [2, 3, 4])

      // Block 2 sees block 1's state: the fresh address holds exactly what was sent, and the
      // sender holds 10,000 ETH minus that value (simulation without validation charges no
      // fee: base fee 0, no gas price given).
      const [freshBalance, simBalance, revert] = blocks[1].calls
      assert.equal(freshBalance.status, 'success')
      assert.equal(hexToBigInt(freshBalance.data), value)
      assert.equal(hexToBigInt(simBalance.data), TEN_THOUSAND_ETH - value)
      assert.equal(revert.status, 'failure')
      assert.ok(revert.error, 'a reverted call carries an error')
      assert.equal(revert.data, '0x')

      // Nothing of it reached the chain.
      assert.equal(await client.getBalance({ address: fresh }), 0n)
      assert.equal(await client.getBalance({ address: simulator.address }), TEN_THOUSAND_ETH)
      assert.equal(await client.getStorageAt({ address: sent.contract, slot: '0x0' }), word(sent.stored))
      assert.equal(await client.getBlockNumber({ cacheTime: 0 }), sent.head)
    })

    test('simulateCalls: results and ETH asset changes', async () => {
      const fresh = privateKeyToAccount(generatePrivateKey()).address
      const value = parseEther('3')
      const { results, assetChanges, block } = await client.simulateCalls({
        account: simulator.address,
        calls: [
          { to: fresh, value },
          { to: sent.contract, data: word(5n) },
        ],
        traceAssetChanges: true,
      })
      assert.equal(block.number, sent.head + 1n)
      assert.equal(results.length, 2)
      assert.equal(results[0].status, 'success')
      assert.equal(results[0].gasUsed, 21000n)
      assert.equal(results[1].status, 'success')
      assert.equal(results[1].data, word(5n))
      assert.equal(results[1].logs.length, 1)
      const decoded = decodeEventLog({ abi: storedAbi, data: results[1].logs[0].data, topics: results[1].logs[0].topics })
      assert.equal(decoded.args.sender, simulator.address)
      assert.equal(decoded.args.value, 5n)

      const eth = assetChanges.find((c) => c.token.address.toLowerCase() === '0xeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee')
      assert.ok(eth, `an ETH entry in assetChanges: ${JSON.stringify(assetChanges, (_, v) => (typeof v === 'bigint' ? v.toString() : v))}`)
      assert.equal(eth.value.pre, TEN_THOUSAND_ETH)
      assert.equal(eth.value.post, TEN_THOUSAND_ETH - value)
      assert.equal(eth.value.diff, -value)
    })

    test('trace_callMany (raw request): call traces and a storage stateDiff', async () => {
      const fresh = privateKeyToAccount(generatePrivateKey()).address
      const value = parseEther('0.25')
      const out = await client.request({
        method: 'trace_callMany',
        params: [
          [
            [{ from: simulator.address, to: fresh, value: toHex(value) }, ['trace']],
            [{ from: simulator.address, to: sent.contract, data: word(9n) }, ['trace', 'stateDiff']],
          ],
          'latest',
        ],
      })
      assert.equal(out.length, 2)

      const [t0, t1] = out
      assert.equal(t0.output, '0x')
      assert.equal(t0.stateDiff, null)
      assert.equal(t0.vmTrace, null)
      assert.equal(t0.trace.length, 1)
      assert.equal(t0.trace[0].type, 'call')
      assert.deepEqual(t0.trace[0].traceAddress, [])
      assert.equal(t0.trace[0].subtraces, 0)
      assert.equal(t0.trace[0].action.callType, 'call')
      assert.equal(t0.trace[0].action.from, simulator.address.toLowerCase())
      assert.equal(t0.trace[0].action.to, fresh.toLowerCase())
      assert.equal(hexToBigInt(t0.trace[0].action.value), value)
      assert.equal(t0.trace[0].action.input, '0x')
      assert.equal(hexToBigInt(t0.trace[0].result.gasUsed), 0n) // parity: gas used beyond the intrinsic 21000
      assert.equal(t0.trace[0].result.output, '0x')

      assert.equal(t1.output, word(9n))
      assert.equal(t1.trace.length, 1)
      assert.equal(t1.trace[0].action.to, sent.contract.toLowerCase())
      assert.equal(t1.trace[0].action.input, word(9n))
      assert.equal(t1.trace[0].result.output, word(9n))
      assert.ok(hexToBigInt(t1.trace[0].result.gasUsed) > 0n)
      // Storage slot 0 goes 101 -> 9, relative to the chain state (the calls are chained, but
      // the first one did not touch the contract).
      const contractDiff = t1.stateDiff[sent.contract.toLowerCase()]
      assert.ok(contractDiff, `stateDiff has the contract: ${JSON.stringify(t1.stateDiff)}`)
      assert.deepEqual(contractDiff.storage[word(0n)], { '*': { from: word(sent.stored), to: word(9n) } })
      assert.equal(contractDiff.balance, '=')
      // The sender's nonce moves from 0 (the first call was already committed: 0 -> 1 -> 2).
      const senderDiff = t1.stateDiff[simulator.address.toLowerCase()]
      assert.ok(senderDiff, 'stateDiff has the sender')
      assert.deepEqual(senderDiff.nonce, { '*': { from: '0x1', to: '0x2' } })

      // The chain is untouched.
      assert.equal(await client.getStorageAt({ address: sent.contract, slot: '0x0' }), word(sent.stored))
      assert.equal(await client.getBalance({ address: fresh }), 0n)
    })
  })
}

// A JSON-RPC account: viem leaves the signing to the node (eth_accounts, eth_sendTransaction,
// personal_sign, eth_signTypedData_v4), as against geth --dev or anvil. Dev account 6, which
// no other check uses.
describe('viem with the node\'s own account', () => {
  const nodeAccount = '0x976EA74026E726554dB657fA54763abd0C3a0aa9'

  test('the node sends and signs for it', async () => {
    const client = createPublicClient({ chain: devChain, transport: http(HTTP_URL), pollingInterval: 100 })
    const wallet = createWalletClient({ account: nodeAccount, chain: devChain, transport: http(HTTP_URL) })
    const listed = (await wallet.getAddresses()).map((a) => a.toLowerCase())
    assert.ok(listed.includes(nodeAccount.toLowerCase()), `eth_accounts: ${listed}`)

    const to = privateKeyToAccount(generatePrivateKey()).address
    const hash = await wallet.sendTransaction({ to, value: 1234n })
    const receipt = await client.waitForTransactionReceipt({ hash })
    assert.equal(receipt.status, 'success')
    assert.equal(receipt.from, nodeAccount.toLowerCase())
    assert.equal(await client.getBalance({ address: to }), 1234n)

    const message = 'signed by the node'
    const signature = await wallet.signMessage({ message })
    assert.ok(await verifyMessage({ address: nodeAccount, message, signature }))

    const typed = {
      domain: { name: 'Ether Mail', version: '1', chainId: 1337, verifyingContract: '0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC' },
      types: {
        Person: [{ name: 'name', type: 'string' }, { name: 'wallet', type: 'address' }],
        Mail: [{ name: 'from', type: 'Person' }, { name: 'to', type: 'Person' }, { name: 'contents', type: 'string' }],
      },
      primaryType: 'Mail',
      message: {
        from: { name: 'Cow', wallet: '0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826' },
        to: { name: 'Bob', wallet: '0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB' },
        contents: 'Hello, Bob!',
      },
    }
    const typedSignature = await wallet.signTypedData(typed)
    assert.ok(await verifyTypedData({ address: nodeAccount, ...typed, signature: typedSignature }))
  })
})

// EIP-7966 through viem's sync actions (eth_sendRawTransactionSync): the receipt comes back as
// the answer, over each transport. Dev account 8, which no other check uses.
describe('viem sync sending', () => {
  test('sendTransactionSync and sendRawTransactionSync answer with the receipt', async () => {
    const account = privateKeyToAccount('0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97')
    const client = createPublicClient({ chain: devChain, transport: http(HTTP_URL), pollingInterval: 100 })
    const to = privateKeyToAccount(generatePrivateKey()).address
    let sentValue = 0n
    for (const [name, makeTransport] of transports) {
      const wallet = createWalletClient({ account, chain: devChain, transport: makeTransport() })
      const receipt = await wallet.sendTransactionSync({ to, value: 77n })
      sentValue += 77n
      assert.equal(receipt.status, 'success', name)
      assert.deepEqual(receipt, await client.getTransactionReceipt({ hash: receipt.transactionHash }), name)

      const serializedTransaction = await wallet.signTransaction(await wallet.prepareTransactionRequest({ to, value: 1n }))
      const raw = await wallet.sendRawTransactionSync({ serializedTransaction, timeout: 5_000 })
      sentValue += 1n
      assert.equal(raw.status, 'success', name)
      assert.equal(raw.blockNumber, receipt.blockNumber + 1n, name)
      if (name === 'WebSocket') (await wallet.transport.getRpcClient()).close()
    }
    assert.equal(await client.getBalance({ address: to }), sentValue)
  })
})

// viem's test actions against the dev node's controls, as a test suite would use them with
// anvil: the clock moved and set, a block mined, and a snapshot reverted to. Everything it
// mines is reverted at the end.
describe('viem test actions on the dev node', () => {
  test('clock, mining and snapshots', async () => {
    const client = createPublicClient({ chain: devChain, transport: http(HTTP_URL), pollingInterval: 100 })
    const testClient = createTestClient({ chain: devChain, mode: 'anvil', transport: http(HTTP_URL) })
    const start = await client.getBlock({ blockTag: 'latest' })
    const id = await testClient.snapshot()

    await testClient.increaseTime({ seconds: 3600 })
    await testClient.request({ method: 'evm_mine', params: [] })
    const later = await client.getBlock({ blockTag: 'latest' })
    assert.equal(later.number, start.number + 1n)
    assert.ok(later.timestamp >= start.timestamp + 3600n, `${later.timestamp} after ${start.timestamp}`)

    const at = later.timestamp + 1000n
    await testClient.setNextBlockTimestamp({ timestamp: at })
    await testClient.request({ method: 'evm_mine', params: [] })
    assert.equal((await client.getBlock({ blockTag: 'latest' })).timestamp, at)

    await testClient.mine({ blocks: 2, interval: 5 })
    const mined = await client.getBlock({ blockTag: 'latest' })
    assert.equal(mined.number, start.number + 4n)
    assert.equal(mined.timestamp, at + 10n)

    await testClient.revert({ id })
    const back = await client.getBlock({ blockTag: 'latest' })
    assert.equal(back.hash, start.hash)
  })

  // The state edits in both of viem's modes (anvil_* and hardhat_* names): each is mined as a
  // block of its own, and a revert takes them back.
  test('state edits', async () => {
    const client = createPublicClient({ chain: devChain, transport: http(HTTP_URL), pollingInterval: 100 })
    for (const mode of ['anvil', 'hardhat']) {
      const testClient = createTestClient({ chain: devChain, mode, transport: http(HTTP_URL) })
      const start = await client.getBlock({ blockTag: 'latest' })
      const id = await testClient.snapshot()
      const address = privateKeyToAccount(generatePrivateKey()).address
      await testClient.setBalance({ address, value: parseEther('5') })
      assert.equal(await client.getBalance({ address }), parseEther('5'), mode)
      await testClient.setNonce({ address, nonce: 7 })
      assert.equal(await client.getTransactionCount({ address }), 7, mode)
      // Returns 42.
      await testClient.setCode({ address, bytecode: '0x602a60005260206000f3' })
      assert.equal((await client.call({ to: address })).data, word(42), mode)
      await testClient.setStorageAt({ address, index: 1, value: word(9) })
      assert.equal(await client.getStorageAt({ address, slot: toHex(1) }), word(9), mode)
      assert.equal((await client.getBlock({ blockTag: 'latest' })).number, start.number + 4n, mode)

      await testClient.revert({ id })
      assert.equal(await client.getBalance({ address }), 0n, mode)
      assert.equal((await client.getBlock({ blockTag: 'latest' })).hash, start.hash, mode)
    }
  })

  // Impersonation in both of viem's modes: a wallet client with a JSON-RPC account sends for
  // an address the node has no key of (eth_sendTransaction), until impersonation stops.
  test('impersonation', async () => {
    const client = createPublicClient({ chain: devChain, transport: http(HTTP_URL), pollingInterval: 100 })
    for (const mode of ['anvil', 'hardhat']) {
      const testClient = createTestClient({ chain: devChain, mode, transport: http(HTTP_URL) })
      const address = privateKeyToAccount(generatePrivateKey()).address
      const to = privateKeyToAccount(generatePrivateKey()).address
      const wallet = createWalletClient({ account: address, chain: devChain, transport: http(HTTP_URL) })
      await testClient.setBalance({ address, value: parseEther('1') })
      await testClient.impersonateAccount({ address })
      const hash = await wallet.sendTransaction({ to, value: 5n })
      const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 100 })
      assert.equal(receipt.status, 'success', mode)
      assert.equal(receipt.from, address.toLowerCase(), mode)
      assert.equal(await client.getBalance({ address: to }), 5n, mode)
      await testClient.stopImpersonatingAccount({ address })
      await assert.rejects(wallet.sendTransaction({ to, value: 1n }), /unknown account/, mode)
    }
  })

  // With automine off, transactions wait for a block asked for and share it; a dropped one
  // never makes it; the block pays the coinbase set.
  test('mining modes, dropped transactions and the coinbase', async () => {
    const client = createPublicClient({ chain: devChain, transport: http(HTTP_URL), pollingInterval: 100 })
    for (const mode of ['anvil', 'hardhat']) {
      const testClient = createTestClient({ chain: devChain, mode, transport: http(HTTP_URL) })
      const account = privateKeyToAccount(generatePrivateKey())
      const coinbase = privateKeyToAccount(generatePrivateKey()).address
      const to = privateKeyToAccount(generatePrivateKey()).address
      const wallet = createWalletClient({ account, chain: devChain, transport: http(HTTP_URL) })
      await testClient.setBalance({ address: account.address, value: parseEther('1') })
      await testClient.setAutomine(false)
      assert.equal(await testClient.getAutomine(), false, mode)
      const first = await wallet.sendTransaction({ to, value: 1n })
      const second = await wallet.sendTransaction({ to, value: 2n })
      const dropped = await wallet.sendTransaction({ to, value: 4n })
      await testClient.dropTransaction({ hash: dropped })
      await testClient.setCoinbase({ address: coinbase })
      // What waits shows at `pending`: the block the miner would build now, unsealed.
      const pending = await client.getBlock({ blockTag: 'pending' })
      assert.equal(pending.hash, null, mode)
      assert.deepEqual(pending.transactions, [first, second], mode)
      assert.equal(await client.getBalance({ address: to, blockTag: 'pending' }), 3n, mode)
      assert.equal(await client.getBalance({ address: to }), 0n, mode)
      await testClient.mine({ blocks: 1 })
      const a = await client.getTransactionReceipt({ hash: first })
      const b = await client.getTransactionReceipt({ hash: second })
      assert.equal(a.blockNumber, b.blockNumber, mode)
      const block = await client.getBlock({ blockNumber: a.blockNumber })
      assert.equal(block.miner, coinbase.toLowerCase(), mode)
      assert.equal(await client.getBalance({ address: to }), 3n, mode)
      assert.equal(await client.getTransaction({ hash: dropped }).catch(() => null), null, mode)
      await testClient.setAutomine(true)
      assert.equal(await testClient.getAutomine(), true, mode)
    }
  })
})
