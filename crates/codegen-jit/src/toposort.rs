//! Parallel topological layers of a dependency graph (Kahn's algorithm, layer by layer):
//! the deterministic helper behind `toposort` and the Graph-of-Thought prelude.

/// The layers of a dependency graph: node `i` depends on the nodes
/// `targets[offsets[i]..offsets[i + 1]]` (flat: two allocations for the whole graph, not
/// one per node). Every node of a layer depends only on nodes of earlier layers; nodes
/// within a layer are in index order. Each layer is turned into a `T` by `emit` as it is
/// found, so the caller builds its own representation with no copy in between.
pub fn layers_flat<T>(
    offsets: &[usize],
    targets: &[i64],
    mut emit: impl FnMut(&[usize]) -> T,
) -> Result<Vec<T>, String> {
    let n = offsets.len().saturating_sub(1);
    let mut indegree = vec![0u32; n];
    // Dependents, flat as well: count, then place.
    let mut starts = vec![0usize; n + 1];
    for node in 0..n {
        for &d in &targets[offsets[node]..offsets[node + 1]] {
            let d = usize::try_from(d).ok().filter(|d| *d < n).ok_or_else(|| {
                format!("node {node} depends on {d}, which is not a node (there are {n})")
            })?;
            indegree[node] += 1;
            starts[d + 1] += 1;
        }
    }
    for i in 0..n {
        starts[i + 1] += starts[i];
    }
    let mut fill = starts.clone();
    let mut dependents = vec![0usize; starts[n]];
    for node in 0..n {
        for &d in &targets[offsets[node]..offsets[node + 1]] {
            let d = d as usize;
            dependents[fill[d]] = node;
            fill[d] += 1;
        }
    }
    let mut layer: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut out = Vec::new();
    let mut placed = 0;
    while !layer.is_empty() {
        placed += layer.len();
        let mut next = Vec::new();
        for &node in &layer {
            for &dependent in &dependents[starts[node]..starts[node + 1]] {
                indegree[dependent] -= 1;
                if indegree[dependent] == 0 {
                    next.push(dependent);
                }
            }
        }
        next.sort_unstable();
        out.push(emit(&layer));
        layer = next;
    }
    if placed < n {
        let stuck: Vec<String> = (0..n)
            .filter(|&i| indegree[i] > 0)
            .take(10)
            .map(|i| i.to_string())
            .collect();
        return Err(format!(
            "the dependencies form a cycle through nodes {}",
            stuck.join(", ")
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::layers_flat;

    /// `deps[i]` lists the nodes node `i` depends on. Returns the layers: every node of a
    /// layer depends only on nodes of earlier layers; nodes within a layer are in index order.
    fn layers(deps: &[Vec<i64>]) -> Result<Vec<Vec<i64>>, String> {
        let mut offsets = Vec::with_capacity(deps.len() + 1);
        let mut targets = Vec::new();
        offsets.push(0);
        for ds in deps {
            targets.extend_from_slice(ds);
            offsets.push(targets.len());
        }
        layers_flat(&offsets, &targets, |layer| {
            layer.iter().map(|&i| i as i64).collect()
        })
    }

    #[test]
    fn layers_and_cycles() {
        assert_eq!(
            layers(&[vec![], vec![0], vec![0], vec![1, 2]]).unwrap(),
            vec![vec![0], vec![1, 2], vec![3]]
        );
        assert_eq!(layers(&[]).unwrap(), Vec::<Vec<i64>>::new());
        assert!(
            layers(&[vec![1], vec![0]])
                .unwrap_err()
                .contains("cycle through nodes 0, 1")
        );
        assert!(layers(&[vec![5]]).unwrap_err().contains("not a node"));
    }
}
