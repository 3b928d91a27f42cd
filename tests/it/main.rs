mod agree;
