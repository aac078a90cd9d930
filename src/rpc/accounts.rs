//! The node's own accounts. With `--dev` they are the ten keys of the test mnemonic the dev
//! chain funds; otherwise there are none (the node is not a wallet: transactions arrive signed).
//!
//! `eth_accounts` lists them, `eth_pendingTransactions` the pool's transactions they sent;
//! `eth_sendTransaction`, `eth_signTransaction`, `eth_sign`,
//! `personal_sign` and `eth_signTypedData_v4` sign with them, so that tools whose default is
//! the node's accounts (hardhat's `remote` accounts, `cast send --unlocked`, web3.py's
//! `send_transaction`) work against a dev node as they do against geth --dev or anvil. Any
//! other sender is -32000 "unknown account", geth's answer.
//!
//! A transaction's missing fields are filled as geth fills them (also for any sender with
//! `eth_fillTransaction`, which answers the transaction unsigned): the sender's pending nonce,
//! the gas `eth_estimateGas` finds, the tip `eth_maxPriorityFeePerGas` suggests and a fee cap
//! of the tip plus twice the head's base fee (a gas price before London), the chain id. The
//! defaults come from the node's own methods, and a signed transaction goes to the pool through
//! `eth_sendRawTransaction`, so it is checked exactly as one sent signed.
//! A blob transaction is made from geth's `blobs` fields (see [`super::blob_args`]): its sidecar,
//! versioned hashes and a blob fee cap of twice the blob base fee are filled in too.
//!
//! A dev node also sends for the accounts it impersonates ([`Impersonation`], set by
//! `anvil_impersonateAccount` and its kin): the filled transaction gets the stand-in signature
//! of `simnode_api::impersonation` and goes through the same checks as a signed one, its
//! sender given rather than recovered. `eth_accounts` lists them after the keys; nothing is
//! signed for them (`eth_sign` and `eth_signTransaction` stay "unknown account"). anvil's
//! `eth_sendUnsignedTransaction` sends that way for any `from`, impersonated or not.

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc, Mutex,
};

use alloy::{
    consensus::{SignableTransaction, TxEnvelope, TypedTransaction},
    eips::{eip2718::Encodable2718, eip7594::BlobTransactionSidecarVariant},
    primitives::{eip191_hash_message, Address, Bytes, TxKind, B256, U256, U64},
    rpc::types::TransactionRequest,
};
use alloy_dyn_abi::TypedData;
use jsonrpsee::{
    core::RpcResult, proc_macros::rpc, server::MethodsError, types::ErrorObjectOwned, Methods,
};
use k256::ecdsa::SigningKey;
use serde::Serialize;
use serde_json::{json, Value};
use simnode_api::{rpc_block::PoolTransaction, unsigned_tx, ModuleContext, RpcError};

use super::blob_args::{BlobArgs, TxArgs};
use crate::store::Store;

/// The most positional params each method reads.
pub const METHOD_PARAMS: simnode_api::MethodParams = &[
    ("eth_accounts", 0),
    ("eth_pendingTransactions", 0),
    ("eth_sendTransaction", 1),
    ("eth_signTransaction", 1),
    ("eth_fillTransaction", 1),
    ("eth_sign", 2),
    ("personal_sign", 2),
    ("eth_signTypedData_v4", 2),
];

/// The same for the accounts method served on a dev node only.
pub const DEV_METHOD_PARAMS: simnode_api::MethodParams = &[("eth_sendUnsignedTransaction", 1)];

#[rpc(server)]
pub trait AccountsApi {
    #[method(name = "eth_accounts")]
    fn accounts(&self) -> RpcResult<Vec<Address>>;
    /// The pool's transactions sent by the node's accounts (geth's: none on a node without).
    #[method(name = "eth_pendingTransactions")]
    fn pending_transactions(&self) -> RpcResult<Vec<PoolTransaction>>;
    #[method(name = "eth_sendTransaction")]
    async fn send_transaction(&self, request: TxArgs) -> RpcResult<B256>;
    /// anvil's: sends for `from` whether or not it is impersonated (dev nodes only).
    #[method(name = "eth_sendUnsignedTransaction")]
    async fn send_unsigned_transaction(&self, request: TxArgs) -> RpcResult<B256>;
    #[method(name = "eth_signTransaction")]
    async fn sign_transaction(&self, request: TxArgs) -> RpcResult<SignedTransaction>;
    /// The request filled in as eth_sendTransaction fills it, unsigned (any sender).
    #[method(name = "eth_fillTransaction")]
    async fn fill_transaction(&self, request: TxArgs) -> RpcResult<SignedTransaction>;
    /// EIP-191 signature of `data` by `address` (geth's argument order).
    #[method(name = "eth_sign")]
    fn sign(&self, address: Address, data: Bytes) -> RpcResult<Bytes>;
    /// The same with the arguments the other way round (MetaMask's order).
    #[method(name = "personal_sign")]
    fn personal_sign(&self, data: Bytes, address: Address) -> RpcResult<Bytes>;
    /// EIP-712 signature of typed data (an object, or the JSON text of one as MetaMask and
    /// viem send it).
    #[method(name = "eth_signTypedData_v4")]
    fn sign_typed_data(&self, address: Address, typed_data: Value) -> RpcResult<Bytes>;
}

/// `eth_signTransaction`'s and `eth_fillTransaction`'s answer, as geth gives it: the encoding
/// and the transaction.
#[derive(Debug, Clone, Serialize)]
pub struct SignedTransaction {
    raw: Bytes,
    tx: Value,
}

impl SignedTransaction {
    /// `tx` encoded and described with its sidecar, if it has one (the form
    /// eth_sendRawTransaction takes; geth puts the blobs back on what it signed).
    fn of(tx: TxEnvelope) -> RpcResult<Self> {
        Ok(Self {
            raw: Bytes::from(tx.encoded_2718()),
            tx: serde_json::to_value(&tx).map_err(RpcError::internal)?,
        })
    }

    /// `tx` unsigned, as geth answers eth_fillTransaction: a zero signature, which leaves a
    /// legacy transaction without its EIP-155 chain id and with `v` zero.
    fn unsigned(tx: TypedTransaction) -> RpcResult<Self> {
        let TypedTransaction::Legacy(legacy) = tx else {
            return Self::of(TxEnvelope::from(
                tx.into_signed(unsigned_tx::zero_signature()),
            ));
        };
        let tx = unsigned_tx::legacy(legacy);
        let mut raw = Vec::new();
        unsigned_tx::encode(&tx, &mut raw);
        let mut json = serde_json::to_value(&tx).map_err(RpcError::internal)?;
        unsigned_tx::legacy_json_v(&mut json);
        Ok(Self {
            raw: raw.into(),
            tx: json,
        })
    }
}

/// The accounts a dev node sends for without their keys, as anvil's and hardhat's
/// `*_impersonateAccount` set them. Empty (and never changed) on other nodes.
#[derive(Debug, Default)]
pub struct Impersonation {
    /// In the order they were added, as `eth_accounts` lists them.
    accounts: Mutex<Vec<Address>>,
    /// `anvil_autoImpersonateAccount`: every account without a key is impersonated.
    auto: AtomicBool,
}

impl Impersonation {
    fn accounts(&self) -> std::sync::MutexGuard<'_, Vec<Address>> {
        self.accounts.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn start(&self, address: Address) {
        let mut accounts = self.accounts();
        if !accounts.contains(&address) {
            accounts.push(address);
        }
    }

    pub fn stop(&self, address: Address) {
        self.accounts().retain(|a| *a != address);
    }

    pub fn set_auto(&self, on: bool) {
        self.auto.store(on, Ordering::Relaxed);
    }

    pub fn covers(&self, address: Address) -> bool {
        self.auto.load(Ordering::Relaxed) || self.accounts().contains(&address)
    }

    pub fn listed(&self) -> Vec<Address> {
        self.accounts().clone()
    }
}

pub struct Accounts {
    keys: Vec<(Address, SigningKey)>,
    impersonation: Arc<Impersonation>,
    /// The node's other methods: defaults are asked of them and transactions sent through them.
    methods: Methods,
    /// What impersonated transactions are checked against and handed to.
    ctx: ModuleContext,
    store: Arc<Store>,
    /// One transaction at a time is filled and sent, so that two from one sender do not take
    /// the same pending nonce.
    sending: tokio::sync::Mutex<()>,
}

impl Accounts {
    pub fn new(
        keys: Vec<(Address, SigningKey)>,
        impersonation: Arc<Impersonation>,
        methods: Methods,
        ctx: ModuleContext,
        store: Arc<Store>,
    ) -> Self {
        Self {
            keys,
            impersonation,
            methods,
            ctx,
            store,
            sending: tokio::sync::Mutex::new(()),
        }
    }

    fn key(&self, address: Address) -> Result<&SigningKey, RpcError> {
        self.keys
            .iter()
            .find(|(a, _)| *a == address)
            .map(|(_, key)| key)
            .ok_or_else(|| RpcError::Server("unknown account".into()))
    }

    /// One of the node's methods, its error passed on as it is.
    async fn ask<T: serde::de::DeserializeOwned + Clone>(
        &self,
        method: &str,
        params: Vec<Value>,
    ) -> RpcResult<T> {
        self.methods
            .call(method, params)
            .await
            .map_err(|err| match err {
                MethodsError::JsonRpc(err) => err,
                other => RpcError::internal(format!("{method}: {other}")).into(),
            })
    }

    /// The request as a transaction signed by its sender, once filled in.
    async fn signed(&self, request: TxArgs) -> RpcResult<TxEnvelope> {
        let key = self.key(request.request.from.unwrap_or_default())?;
        let tx = self.filled(request).await?;
        let signature =
            crate::chain::sign_hash(key, tx.signature_hash()).map_err(RpcError::internal)?;
        Ok(TxEnvelope::from(tx.into_signed(signature)))
    }

    /// The request with every field filled in, as a transaction (the sender is the zero
    /// address when not given, as in geth).
    async fn filled(&self, args: TxArgs) -> RpcResult<TypedTransaction> {
        let TxArgs { mut request, blobs } = args;
        let from = request.from.unwrap_or_default();
        request.from = Some(from);
        let chain_id = self.store.spec().chain_id;
        match request.chain_id {
            Some(id) if id != chain_id => {
                return Err(server(simnode_api::vm_messages::chain_id_mismatch(
                    id, chain_id,
                )))
            }
            _ => request.chain_id = Some(chain_id),
        }
        let sidecar = self.blob_defaults(&mut request, blobs).await?;
        let input = request.input.clone().try_into_unique_input().map_err(|_| {
            server("both \"data\" and \"input\" are set and not equal. Please use \"input\" to pass transaction call data")
        })?;
        if request.to.is_none() {
            if input.as_ref().is_none_or(|i| i.is_empty()) {
                return Err(server("contract creation without any data provided"));
            }
            // alloy's builder wants a creation said out loud.
            request.to = Some(TxKind::Create);
        }
        apply_requested_type(&mut request)?;
        self.fill_fees(&mut request).await?;
        if request.value.is_none() {
            request.value = Some(U256::ZERO);
        }
        if request.nonce.is_none() {
            let nonce: U64 = self
                .ask(
                    "eth_getTransactionCount",
                    vec![json!(from), json!("pending")],
                )
                .await?;
            request.nonce = Some(nonce.saturating_to());
        }
        if request.gas.is_none() {
            // On the pending block, where the pool's transactions have run: a call to a contract
            // created by a transaction still waiting is estimated against its code (anvil and
            // hardhat estimate there too).
            let gas: U64 = self
                .ask("eth_estimateGas", vec![json!(request), json!("pending")])
                .await?;
            request.gas = Some(gas.saturating_to());
        }
        request.sidecar = sidecar;
        request
            .build_typed_tx()
            .map_err(|_| server("the transaction's fields do not make a transaction of any type"))
    }

    /// A blob transaction's defaults, as geth fills them: the sidecar `blobs` make (see
    /// [`BlobArgs::into_sidecar`]) and its versioned hashes, and a blob fee cap of twice the
    /// next block's blob base fee. A blob transaction must name its recipient. The sidecar is
    /// given back to go on the transaction once the rest is filled in.
    async fn blob_defaults(
        &self,
        request: &mut TransactionRequest,
        blobs: Option<BlobArgs>,
    ) -> RpcResult<Option<BlobTransactionSidecarVariant>> {
        if blobs.is_none() && request.blob_versioned_hashes.is_none() {
            return Ok(None);
        }
        if !matches!(request.to, Some(TxKind::Call(_))) {
            return Err(server("missing \"to\" in blob transaction"));
        }
        let sidecar = match blobs {
            Some(blobs) => {
                let head = self.store.head_header().map_err(RpcError::internal)?;
                let spec = self.ctx.spec.spec_id(head.number + 1, head.timestamp);
                // Bounds the proofs computed below, as eth_sendRawTransaction bounds a sidecar.
                simnode_eth::send::check_blob_count(&self.ctx.spec, blobs.count(), head.timestamp)?;
                // Computing and verifying proofs takes up to seconds: not on the runtime.
                let hashes = request.blob_versioned_hashes.clone();
                let sidecar = tokio::task::spawn_blocking(move || {
                    blobs.into_sidecar(hashes.as_deref(), spec)
                })
                .await
                .map_err(RpcError::internal)??;
                request.blob_versioned_hashes = Some(sidecar.versioned_hashes().collect());
                Some(sidecar)
            }
            None => None,
        };
        if request.max_fee_per_blob_gas.is_none() {
            let blob_base_fee: U256 = self.ask("eth_blobBaseFee", vec![]).await?;
            request.max_fee_per_blob_gas =
                Some(blob_base_fee.saturating_to::<u128>().saturating_mul(2));
        }
        Ok(sidecar)
    }

    /// geth's fee defaults: a gas price before London (or when one is given, or the request asks
    /// for a legacy or access-list transaction), else a tip and a fee cap of the tip plus twice
    /// the head's base fee.
    async fn fill_fees(&self, request: &mut TransactionRequest) -> RpcResult<()> {
        let dynamic =
            request.max_fee_per_gas.is_some() || request.max_priority_fee_per_gas.is_some();
        if request.gas_price.is_some() {
            if dynamic {
                return Err(server(
                    "both gasPrice and (maxFeePerGas or maxPriorityFeePerGas) specified",
                ));
            }
            return Ok(());
        }
        let head = self.store.head_header().map_err(RpcError::internal)?;
        let priced = matches!(request.transaction_type, Some(0 | 1));
        let Some(base_fee) = head.base_fee_per_gas.filter(|_| !priced) else {
            if head.base_fee_per_gas.is_none()
                && (dynamic || request.transaction_type.is_some_and(|t| t >= 2))
            {
                return Err(server(
                    "maxFeePerGas and maxPriorityFeePerGas are not valid before London is active",
                ));
            }
            let price: U256 = self.ask("eth_gasPrice", vec![]).await?;
            request.gas_price = Some(price.saturating_to());
            return Ok(());
        };
        let tip = match request.max_priority_fee_per_gas {
            Some(tip) => tip,
            None => {
                let tip: U256 = self.ask("eth_maxPriorityFeePerGas", vec![]).await?;
                tip.saturating_to()
            }
        };
        let cap = request
            .max_fee_per_gas
            .unwrap_or_else(|| tip.saturating_add(2 * u128::from(base_fee)));
        if cap < tip {
            return Err(server(format!(
                "maxFeePerGas ({cap}) < maxPriorityFeePerGas ({tip})"
            )));
        }
        request.max_priority_fee_per_gas = Some(tip);
        request.max_fee_per_gas = Some(cap);
        Ok(())
    }

    /// The request filled in and sent for its sender without a key, with the stand-in
    /// signature naming it; checked as a signed transaction is.
    async fn send_impersonated(&self, request: TxArgs) -> RpcResult<B256> {
        let from = request.request.from.unwrap_or_default();
        let tx = self.filled(request).await?;
        let tx = TxEnvelope::from(tx.into_signed(simnode_api::impersonation::signature(from)));
        // A blob transaction's proofs are verified there: not on the runtime.
        let ctx = self.ctx.clone();
        let submitted = async move {
            tokio::task::spawn_blocking(move || simnode_eth::send::submit(&ctx, tx, from))
                .await
                .map_err(RpcError::internal)?
                .map_err(simnode_eth::send::submit_error)
        };
        simnode_eth::send_sync::sent(&self.ctx, submitted).await
    }

    fn sign_message(&self, address: Address, data: &[u8]) -> RpcResult<Bytes> {
        self.sign_digest(address, eip191_hash_message(data))
    }

    fn sign_digest(&self, address: Address, digest: B256) -> RpcResult<Bytes> {
        let key = self.key(address)?;
        let signature = crate::chain::sign_hash(key, digest).map_err(RpcError::internal)?;
        // r, s and v as 27 or 28, as geth's eth_sign returns them.
        Ok(Bytes::from(signature.as_bytes().to_vec()))
    }
}

/// Holds the request to the transaction type it names, if it names one. alloy (and geth, which
/// has no `type` field) pick the type from the fields given, so `"type": "0x1"` with a gas price
/// and no access list would be signed as a legacy transaction: the access list is filled in as
/// empty instead, and fields the named type cannot carry are refused rather than dropped.
fn apply_requested_type(request: &mut TransactionRequest) -> RpcResult<()> {
    let Some(kind) = request.transaction_type else {
        return Ok(());
    };
    let dynamic = request.max_fee_per_gas.is_some() || request.max_priority_fee_per_gas.is_some();
    let blob = request.blob_versioned_hashes.is_some() || request.max_fee_per_blob_gas.is_some();
    let set_code = request.authorization_list.is_some();
    let refuse = |fields: &str| {
        Err(server(format!(
            "a transaction of type {kind:#x} cannot carry {fields}"
        )))
    };
    if kind > 4 {
        return Err(server(format!(
            "transaction type {kind:#x} is not supported"
        )));
    }
    if kind <= 1 && dynamic {
        return refuse("maxFeePerGas or maxPriorityFeePerGas");
    }
    if kind == 0 && request.access_list.is_some() {
        return refuse("an accessList");
    }
    if kind >= 2 && request.gas_price.is_some() {
        return refuse("a gasPrice");
    }
    if blob != (kind == 3) {
        return match kind {
            3 => Err(server("a transaction of type 0x3 needs blobs")),
            _ => refuse("blobs"),
        };
    }
    if set_code != (kind == 4) {
        return match kind {
            4 => Err(server(
                "a transaction of type 0x4 needs an authorizationList",
            )),
            _ => refuse("an authorizationList"),
        };
    }
    if kind == 1 {
        request.access_list.get_or_insert_default();
    }
    Ok(())
}

fn server(message: impl Into<String>) -> ErrorObjectOwned {
    RpcError::Server(message.into()).into()
}

#[jsonrpsee::core::async_trait]
impl AccountsApiServer for Accounts {
    fn accounts(&self) -> RpcResult<Vec<Address>> {
        let mut accounts: Vec<Address> = self.keys.iter().map(|(address, _)| *address).collect();
        for address in self.impersonation.listed() {
            if !accounts.contains(&address) {
                accounts.push(address);
            }
        }
        Ok(accounts)
    }

    fn pending_transactions(&self) -> RpcResult<Vec<PoolTransaction>> {
        let ours = self.accounts()?;
        Ok(self
            .ctx
            .pool
            .pending()
            .into_iter()
            .filter(|tx| ours.contains(&tx.signer()))
            .map(PoolTransaction::of)
            .collect())
    }

    async fn send_transaction(&self, request: TxArgs) -> RpcResult<B256> {
        let _one_at_a_time = self.sending.lock().await;
        let from = request.request.from.unwrap_or_default();
        if self.key(from).is_err() && self.impersonation.covers(from) {
            return self.send_impersonated(request).await;
        }
        let tx = self.signed(request).await?;
        let raw = Bytes::from(tx.encoded_2718());
        self.ask("eth_sendRawTransaction", vec![json!(raw)]).await
    }

    async fn send_unsigned_transaction(&self, request: TxArgs) -> RpcResult<B256> {
        if request.request.from.is_none() {
            return Err(
                RpcError::invalid_params("missing \"from\": the account to send for").into(),
            );
        }
        let _one_at_a_time = self.sending.lock().await;
        self.send_impersonated(request).await
    }

    async fn sign_transaction(&self, request: TxArgs) -> RpcResult<SignedTransaction> {
        let _one_at_a_time = self.sending.lock().await;
        let tx = self.signed(request).await?;
        SignedTransaction::of(tx)
    }

    async fn fill_transaction(&self, request: TxArgs) -> RpcResult<SignedTransaction> {
        SignedTransaction::unsigned(self.filled(request).await?)
    }

    fn sign(&self, address: Address, data: Bytes) -> RpcResult<Bytes> {
        self.sign_message(address, &data)
    }

    fn personal_sign(&self, data: Bytes, address: Address) -> RpcResult<Bytes> {
        self.sign_message(address, &data)
    }

    fn sign_typed_data(&self, address: Address, typed_data: Value) -> RpcResult<Bytes> {
        let typed_data = match typed_data {
            Value::String(text) => serde_json::from_str(&text),
            other => serde_json::from_value(other),
        };
        let typed_data: TypedData = typed_data.map_err(|e| {
            RpcError::invalid_params(format!("invalid argument 1: not EIP-712 typed data: {e}"))
        })?;
        let digest = typed_data.eip712_signing_hash().map_err(|e| {
            RpcError::invalid_params(format!(
                "invalid argument 1: cannot hash the typed data: {e}"
            ))
        })?;
        self.sign_digest(address, digest)
    }
}

/// The accounts methods over `keys` and the impersonated accounts, asking `methods` (the
/// node's other methods) for defaults. `eth_sendUnsignedTransaction` only on a dev node.
pub fn rpc_module(
    keys: Vec<(Address, SigningKey)>,
    impersonation: Arc<Impersonation>,
    methods: Methods,
    ctx: ModuleContext,
    store: Arc<Store>,
    dev: bool,
) -> Methods {
    let mut module = Accounts::new(keys, impersonation, methods, ctx, store).into_rpc();
    if !dev {
        module.remove_method("eth_sendUnsignedTransaction");
    }
    module.into()
}
