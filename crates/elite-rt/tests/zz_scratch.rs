use elite_rt::*;
fn go(kib: usize, silent: bool) {
    if silent {
        std::panic::set_hook(Box::new(|_| {}));
    }
    let rt = Runtime::builder().processors(1).build().unwrap();
    let r = rt.block_on(move || {
        Builder::new().stack_size(kib * 1024).spawn(|| -> u32 { panic!("small") }).unwrap().join().is_err()
    });
    println!("kib={kib} silent={silent} ok={r}");
}
#[test]
fn k() {
    let kib: usize = std::env::var("KIB").unwrap().parse().unwrap();
    let silent = std::env::var("SILENT").is_ok();
    go(kib, silent);
}
