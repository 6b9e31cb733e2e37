//! Smoke test: the crate-level example, with the stats table printed.

use elite_rt::Runtime;

#[test]
fn doc_example_sum() {
    let rt = Runtime::builder().processors(2).build().unwrap();
    let sum = rt.block_on(|| {
        let hs: Vec<_> = (0..1000u64).map(|i| elite_rt::spawn(move || i)).collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(sum, 499_500);
    println!("{}", rt.stats());
}
