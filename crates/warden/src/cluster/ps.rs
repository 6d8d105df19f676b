//! `warden ps --cluster`: each node answers with its own tasks; the
//! asking node gathers the live nodes' answers for up to [`GATHER`].

use super::{intake, replay, Shared, ANY, GATHER};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::Arc;

impl Shared {
    /// This node's part of `warden ps --cluster`.
    fn my_tasks(&self) -> serde_json::Value {
        serde_json::json!({ "node": self.node, "tasks": (self.task_list)() })
    }

    /// Answers `warden ps --cluster` from other nodes: in a keyed
    /// cluster, only members' questions, each once.
    pub(super) async fn answer_ps(self: Arc<Self>, mut sub: intake::Feed) {
        let mut windows: HashMap<String, replay::Window> = HashMap::new();
        while let Some(msg) = sub.next().await {
            let Some(reply) = msg.reply.clone() else {
                continue;
            };
            let Some((_, seal)) = self.opened(&msg) else {
                continue;
            };
            if let Some(seal) = seal {
                let window = windows.entry(seal.signer.to_string()).or_default();
                if !window.take(seal.instance, seal.seq) {
                    self.stats.forged();
                    continue;
                }
            }
            let s = self.clone();
            let mine = tokio::task::spawn_blocking(move || s.my_tasks()).await;
            let bytes = serde_json::to_vec(&mine.unwrap_or_default()).unwrap_or_default();
            let answer = self.sealed(&reply, "", bytes, ANY);
            let _ = self.client.publish(reply, answer).await;
        }
    }

    /// Every live node's tasks (see [`Cluster::tasks`]).
    pub(super) async fn gather(self: Arc<Self>) -> Vec<serde_json::Value> {
        let s = self.clone();
        let mut all = vec![tokio::task::spawn_blocking(move || s.my_tasks())
            .await
            .unwrap_or_default()];
        let expected = {
            let now = self.now_ms();
            self.lock_dir().nodes(now).len()
        };
        let inbox = self.client.new_inbox();
        let Ok(mut sub) = self.client.subscribe(inbox.clone()).await else {
            return all;
        };
        let ps = self.subjects.ps();
        let question = self.sealed(&ps, &inbox, Vec::new(), ANY);
        if self
            .client
            .publish_with_reply(ps, inbox, question)
            .await
            .is_err()
        {
            return all;
        }
        let deadline = tokio::time::Instant::now() + GATHER;
        while all.len() <= expected {
            match tokio::time::timeout_at(deadline, sub.next()).await {
                Ok(Some(msg)) => all.extend(self.ps_answer(&msg)),
                _ => break,
            }
        }
        all.sort_by(|a, b| a["node"].as_str().cmp(&b["node"].as_str()));
        all
    }

    /// Another node's answer to `warden ps --cluster`, if well formed and
    /// (in a keyed cluster) sealed by the node it speaks for.
    fn ps_answer(&self, msg: &async_nats::Message) -> Option<serde_json::Value> {
        let (frame, seal) = self.opened(msg)?;
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(frame) else {
            self.stats.drop_frame();
            return None;
        };
        let node = v["node"].as_str();
        if node == Some(self.node.as_str()) {
            return None;
        }
        if node.is_none() || !v["tasks"].is_array() {
            self.stats.drop_frame();
            return None;
        }
        if seal.is_some_and(|s| Some(s.signer) != node) {
            self.stats.forged();
            return None;
        }
        Some(v)
    }
}
