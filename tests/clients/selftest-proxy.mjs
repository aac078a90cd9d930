// Fault injector for tests/clients/selftest.sh: an HTTP proxy in front of simnode that
// forwards every request unchanged and flips `status` (0x1 <-> 0x0) in every receipt of an
// eth_getBlockReceipts answer. Everything else passes through untouched, so exactly the
// receipt checks of the client suites must fail. Built-in modules only.
import http from 'node:http'

const upstream = process.env.SIMNODE_UPSTREAM
const port = Number(process.env.PROXY_PORT)

function breakReceipts(request, response) {
  if (request?.method !== 'eth_getBlockReceipts' || !Array.isArray(response?.result)) return response
  for (const receipt of response.result) receipt.status = receipt.status === '0x1' ? '0x0' : '0x1'
  return response
}

http
  .createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', async () => {
      try {
        const body = Buffer.concat(chunks)
        const answer = await fetch(upstream + req.url, {
          method: req.method,
          headers: { 'content-type': req.headers['content-type'] ?? 'application/json' },
          body: req.method === 'POST' ? body : undefined,
        })
        let text = await answer.text()
        try {
          const request = JSON.parse(body.toString('utf8'))
          const response = JSON.parse(text)
          text = JSON.stringify(
            Array.isArray(request)
              ? response.map((r) => breakReceipts(request.find((q) => q.id === r.id), r))
              : breakReceipts(request, response),
          )
        } catch {
          // not JSON-RPC: pass through as is
        }
        res.writeHead(answer.status, { 'content-type': 'application/json' })
        res.end(text)
      } catch (e) {
        res.writeHead(502)
        res.end(String(e))
      }
    })
  })
  .listen(port, '127.0.0.1', () => console.log(`receipt-breaking proxy on ${port} -> ${upstream}`))
